package gpu

import (
	"bytes"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/trainbot/trainbot/internal/termsafe"
)

// identity is who runs a process and what it runs, from /proc.
type identity struct {
	uid     int // -1 when unknown
	name    string
	command string
}

// readIdentity reads a process's real uid (/proc/PID/status), its command
// line (/proc/PID/cmdline) and its comm. Both files of another user's
// process are readable (unlike environ); what cannot be read is unknown.
func readIdentity(root string, pid int) identity {
	id := identity{uid: -1}
	dir := root + "/" + strconv.Itoa(pid)
	if b, err := os.ReadFile(dir + "/status"); err == nil {
		id.uid = parseStatusUID(b)
	}
	if b, err := os.ReadFile(dir + "/cmdline"); err == nil {
		id.command = parseCmdline(b)
	}
	if b, err := os.ReadFile(dir + "/comm"); err == nil {
		id.name = strings.TrimSpace(string(b))
	}
	return id
}

// parseStatusUID is the real uid of a /proc/PID/status ("Uid:\t1000\t1000\t1000\t1000"),
// -1 when it has none.
func parseStatusUID(b []byte) int {
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		rest, ok := bytes.CutPrefix(line, []byte("Uid:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) == 0 {
			return -1
		}
		n, err := strconv.Atoi(string(f[0]))
		if err != nil || n < 0 {
			return -1
		}
		return n
	}
	return -1
}

// parseCmdline joins the NUL-separated arguments of a /proc/PID/cmdline
// with spaces, cut to MaxCommand runes (with "…") and made safe to print
// on a terminal. A process that rewrote its arguments (setproctitle) may
// use spaces and no NULs: that reads the same.
func parseCmdline(b []byte) string {
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return ""
	}
	s := strings.ReplaceAll(string(b), "\x00", " ")
	return truncateRunes(termsafe.Field(s), MaxCommand)
}

// truncateRunes cuts s to n runes, the last one "…" when cut.
func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i, count := 0, 0
	for j := range s {
		if count == n-1 {
			i = j
			break
		}
		count++
	}
	return s[:i] + "…"
}

// holderKey is one process on one device.
type holderKey struct {
	uuid string
	pid  int
}

// holderBook fills in who holds the devices: each process's user and
// command, read from /proc once while the process stays on a device, with
// user names cached by uid, and (for a Monitor) since when each process
// has been on its device. It is safe for concurrent use.
type holderBook struct {
	root string // "/proc"

	mu    sync.Mutex
	users map[int]string   // uid -> name, or the number when it has none
	ids   map[int]identity // pid -> identity, while the pid is on a device
	since map[holderKey]time.Time
}

func newHolderBook() *holderBook {
	return &holderBook{root: "/proc", users: map[int]string{}, ids: map[int]identity{}, since: map[holderKey]time.Time{}}
}

// userName resolves uid with os/user once; a uid without a name (a
// container's user, no NSS entry) is its number. Called with b.mu held.
func (b *holderBook) userName(uid int) string {
	if uid < 0 {
		return ""
	}
	if n, ok := b.users[uid]; ok {
		return n
	}
	n := strconv.Itoa(uid)
	if u, err := user.LookupId(n); err == nil && u.Username != "" {
		n = termsafe.Field(u.Username)
	}
	b.users[uid] = n
	return n
}

// identify fills UID, User, Command and Name of each process, reading
// /proc only for a pid it does not know yet.
func (b *holderBook) identify(procs []Process) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range procs {
		p := &procs[i]
		id, ok := b.ids[p.PID]
		if !ok {
			// Unknown stays unknown while the pid stays on a device: NVML
			// lists live processes, so one /proc cannot show (another PID
			// namespace) is not read again at every sample.
			id = readIdentity(b.root, p.PID)
			b.ids[p.PID] = id
		}
		p.UID, p.User, p.Command = id.uid, b.userName(id.uid), id.command
		if p.Name == "" {
			p.Name = id.name
		}
	}
}

// observe sets each process's Since (the first time it was seen on its
// device, s.At for a new one) and forgets the processes no longer on a
// device that was sampled. A device missing from s (it did not answer)
// keeps its processes' times.
func (b *holderBook) observe(s *Snapshot) {
	b.mu.Lock()
	defer b.mu.Unlock()
	uuids := deviceUUIDs(s.Devices)
	present := make(map[holderKey]bool, len(s.Processes))
	pids := make(map[int]bool, len(s.Processes))
	for i := range s.Processes {
		p := &s.Processes[i]
		k := holderKey{uuids[p.Device], p.PID}
		t, ok := b.since[k]
		if !ok {
			t = s.At
			b.since[k] = t
		}
		p.Since = t
		present[k] = true
		pids[p.PID] = true
	}
	sampled := make(map[string]bool, len(s.Devices))
	for _, d := range s.Devices {
		sampled[d.UUID] = true
	}
	for k := range b.since {
		if sampled[k.uuid] && !present[k] {
			delete(b.since, k)
		}
	}
	if s.Available {
		for pid := range b.ids {
			if !pids[pid] {
				delete(b.ids, pid)
			}
		}
	}
}

// sinceOf sets each process's Since from what observe saw, s.At for a
// process it has not seen; it remembers nothing (a fresh Collect for 显卡
// between two samples).
func (b *holderBook) sinceOf(s *Snapshot) {
	b.mu.Lock()
	defer b.mu.Unlock()
	uuids := deviceUUIDs(s.Devices)
	for i := range s.Processes {
		p := &s.Processes[i]
		if t, ok := b.since[holderKey{uuids[p.Device], p.PID}]; ok {
			p.Since = t
		} else {
			p.Since = s.At
		}
	}
}

// deviceUUIDs maps each device's index to its UUID.
func deviceUUIDs(devs []Device) map[int]string {
	m := make(map[int]string, len(devs))
	for _, d := range devs {
		m[d.Index] = d.UUID
	}
	return m
}
