package procfs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Memory is the host's memory as /proc/meminfo says, in bytes.
type Memory struct {
	Total     uint64 // MemTotal
	Available uint64 // MemAvailable
}

// Meminfo reads /proc/meminfo.
func Meminfo() (Memory, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return Memory{}, fmt.Errorf("host memory: %w", err)
	}
	defer f.Close()
	return ParseMeminfo(f)
}

// ParseMeminfo reads MemTotal and MemAvailable from the text of
// /proc/meminfo; it is an error when there is no MemTotal.
func ParseMeminfo(r io.Reader) (Memory, error) {
	var m Memory
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			continue
		}
		if len(fields) > 1 && fields[1] == "kB" {
			v *= 1024
		}
		switch name {
		case "MemTotal":
			m.Total = v
		case "MemAvailable":
			m.Available = v
		}
	}
	if err := sc.Err(); err != nil {
		return Memory{}, err
	}
	if m.Total == 0 {
		return Memory{}, errors.New("host memory: no MemTotal in /proc/meminfo")
	}
	return m, nil
}
