package gpufree

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/internal/units"
)

// Want is what a request waits for, in l: "2 free GPUs with ≥ 20 GiB of
// free memory each", "1 free GPU".
func Want(l i18n.Lang, n int, memory uint64) string {
	if memory == 0 {
		return l.T(i18n.GPUFreeWant, n)
	}
	return l.T(i18n.GPUFreeWantMem, n, Size(memory))
}

// Size prints a memory size as the chat reads it: "20 GiB", "19.53 GiB".
func Size(memory uint64) string {
	s := units.Bytes(int64(min(memory, math.MaxInt64)))
	num, unit, ok := strings.Cut(s, " ")
	if !ok {
		return s
	}
	return units.TrimZeros(num) + " " + unit
}

// sizeWord is a size as 通知空闲 reads it back exactly: "20GiB",
// "20000MiB", "20000000000B".
func sizeWord(memory uint64) string {
	for _, u := range []struct {
		name string
		size uint64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}} {
		if memory%u.size == 0 {
			return strconv.FormatUint(memory/u.size, 10) + u.name
		}
	}
	return strconv.FormatUint(memory, 10) + "B"
}

// Command is the command that asks for n GPUs with memory free each, as
// typed in l: "通知空闲 2 20GiB", "/notifyfree 2 20GiB" in English.
func Command(l i18n.Lang, n int, memory uint64) string {
	s := "通知空闲 " + strconv.Itoa(n)
	if l == i18n.En {
		s = "/notifyfree " + strconv.Itoa(n)
	}
	if memory > 0 {
		s += " " + sizeWord(memory)
	}
	return s
}

// OffCommand is the command that cancels a chat's requests, in l.
func OffCommand(l i18n.Lang) string {
	if l == i18n.En {
		return "/notifyfree off"
	}
	return "通知空闲 关"
}

// FreeNow is the message that n GPUs with memory free each are free: the
// GPUs are indices (NVML's).
func FreeNow(l i18n.Lang, n int, memory uint64, indices []int) chat.Reply {
	idx := make([]string, len(indices))
	for i, x := range indices {
		idx[i] = strconv.Itoa(x)
	}
	list := strings.Join(idx, l.Pick("、", ", "))
	if list == "" {
		list = "?"
	}
	var text string
	if memory == 0 {
		text = l.T(i18n.GPUFreeNow, n, list)
	} else {
		text = l.T(i18n.GPUFreeNowMem, n, list, Size(memory))
	}
	return chat.Reply{Text: text, Kind: chat.KindAlert, Alert: chat.AlertGPUFree}
}

// Expired is the message that a request waited for ttl unmet and ended.
func Expired(l i18n.Lang, n int, memory uint64, ttl time.Duration) chat.Reply {
	return chat.Reply{Text: l.T(i18n.GPUFreeExpired, Want(l, n, memory), l.Duration(ttl), Command(l, n, memory)), Kind: chat.KindNotice}
}
