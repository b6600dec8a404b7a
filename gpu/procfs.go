package gpu

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is one process of the table.
type proc struct {
	ppid  int
	pgid  int
	state byte
	start uint64 // clock ticks after boot
	rss   int64  // pages
}

// Procs is the host's process table read from /proc at one instant: enough
// of each /proc/PID/stat to attribute a process to a run (parent, process
// group) and to sum a run's resident memory.
type Procs struct {
	root     string
	m        map[int]proc
	pageSize int64
}

// ReadProcs reads /proc/PID/stat of every process. Processes that end
// while it reads are skipped.
func ReadProcs() (*Procs, error) { return readProcs("/proc") }

func readProcs(root string) (*Procs, error) {
	d, err := os.Open(root)
	if err != nil {
		return nil, fmt.Errorf("read processes: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, fmt.Errorf("read processes: %w", err)
	}
	p := &Procs{root: root, m: make(map[int]proc, len(names)), pageSize: int64(os.Getpagesize())}
	var buf [1024]byte
	path := make([]byte, 0, len(root)+32)
	for _, name := range names {
		if name == "" || name[0] < '0' || name[0] > '9' {
			continue
		}
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		path = append(append(append(path[:0], root...), '/'), name...)
		path = append(path, "/stat"...)
		b, err := readSmall(path, buf[:])
		if err != nil {
			continue // ended meanwhile, or not readable
		}
		st, err := parseStat(b)
		if err != nil {
			continue
		}
		p.m[pid] = st
	}
	return p, nil
}

// readSmall reads a small file into buf with three system calls (the
// os.File path adds a poller registration and a stat per file).
func readSmall(path []byte, buf []byte) ([]byte, error) {
	name := string(path)
	fd, err := syscall.Open(name, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	n := 0
	for n < len(buf) {
		k, err := syscall.Read(fd, buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if k == 0 {
			break
		}
		n += k
	}
	return buf[:n], nil
}

var errStat = errors.New("malformed /proc/PID/stat")

// parseStat reads the fields trainbot needs from a /proc/PID/stat line.
// The command name is in parentheses and may contain anything, spaces and
// parentheses included, so the fields start after the last ')'.
func parseStat(b []byte) (proc, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return proc{}, errStat
	}
	b = b[i+2:]
	// Field 3 is the state; counting from it: ppid is 1, pgrp 2,
	// starttime 19, rss 21.
	var p proc
	for f := 0; f <= 21; f++ {
		j := bytes.IndexByte(b, ' ')
		var tok []byte
		if j < 0 {
			tok, b = bytes.TrimRight(b, "\n"), nil
		} else {
			tok, b = b[:j], b[j+1:]
		}
		if len(tok) == 0 {
			return proc{}, errStat
		}
		switch f {
		case 0:
			p.state = tok[0]
		case 1:
			p.ppid = atoi(tok)
		case 2:
			p.pgid = atoi(tok)
		case 19:
			p.start = uint64(atoi(tok))
		case 21:
			p.rss = int64(atoi(tok))
		}
		if b == nil && f < 21 {
			return proc{}, errStat
		}
	}
	return p, nil
}

// atoi reads a decimal integer, possibly negative; junk reads as 0.
func atoi(b []byte) int {
	neg := false
	if len(b) > 0 && b[0] == '-' {
		neg, b = true, b[1:]
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int(c-'0')
	}
	if neg {
		return -n
	}
	return n
}

// Len is the number of processes in the table.
func (p *Procs) Len() int { return len(p.m) }

// Alive reports whether pid is in the table and not a zombie.
func (p *Procs) Alive(pid int) bool {
	st, ok := p.m[pid]
	return ok && st.state != 'Z'
}

// Owner returns the run that owns pid: the run whose process group holds
// pid or one of its ancestors, or whose main process is an ancestor (a
// child that left the group with setsid). runs maps a run's process group
// id, which is its main process's PID, to the run id. 0 when none.
func (p *Procs) Owner(pid int, runs map[int]int64) int64 {
	if len(runs) == 0 {
		return 0
	}
	for depth, cur := 0, pid; depth < 4096 && cur > 0; depth++ {
		if id, ok := runs[cur]; ok {
			return id
		}
		st, ok := p.m[cur]
		if !ok {
			return 0
		}
		if id, ok := runs[st.pgid]; ok {
			return id
		}
		if st.ppid == cur {
			return 0
		}
		cur = st.ppid
	}
	return 0
}

// treeUsage is the resident memory of one run's processes.
type treeUsage struct {
	rss   int64 // bytes
	procs int
}

// usage sums the resident memory and counts the live processes of every
// run's tree, visiting each process once.
func (p *Procs) usage(runs map[int]int64) map[int64]treeUsage {
	out := make(map[int64]treeUsage, len(runs))
	if len(runs) == 0 {
		return out
	}
	owner := make(map[int]int64, len(p.m))
	var path []int
	for pid, st := range p.m {
		if st.state == 'Z' {
			continue
		}
		id := p.ownerMemo(pid, runs, owner, &path)
		if id == 0 {
			continue
		}
		u := out[id]
		u.rss += st.rss * p.pageSize
		u.procs++
		out[id] = u
	}
	return out
}

// ownerMemo is Owner with a cache shared across calls: every process on
// the walked path gets the answer, so the whole table costs O(processes).
func (p *Procs) ownerMemo(pid int, runs map[int]int64, cache map[int]int64, path *[]int) int64 {
	*path = (*path)[:0]
	var id int64
	for depth, cur := 0, pid; depth < 4096 && cur > 0; depth++ {
		if v, ok := cache[cur]; ok {
			id = v
			break
		}
		*path = append(*path, cur)
		if v, ok := runs[cur]; ok {
			id = v
			break
		}
		st, ok := p.m[cur]
		if !ok {
			break
		}
		if v, ok := runs[st.pgid]; ok {
			id = v
			break
		}
		if st.ppid == cur {
			break
		}
		cur = st.ppid
	}
	for _, q := range *path {
		cache[q] = id
	}
	return id
}

// Comm returns a process's command name, "" when it cannot be read.
func (p *Procs) Comm(pid int) string {
	b, err := os.ReadFile(p.root + "/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100

// Started returns when a process started; ok is false when it is not in
// the table or the boot time cannot be read.
func (p *Procs) Started(pid int) (time.Time, bool) {
	st, ok := p.m[pid]
	if !ok {
		return time.Time{}, false
	}
	b, err := os.ReadFile(p.root + "/stat")
	if err != nil {
		return time.Time{}, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			sec, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, false
			}
			return time.Unix(sec, 0).Add(time.Duration(st.start) * time.Second / clockTicks), true
		}
	}
	return time.Time{}, false
}
