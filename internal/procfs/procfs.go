// Package procfs reads the Linux process table from /proc: enough of each
// /proc/PID/stat to know a process's parent, process group, start time and
// resident memory. trainbot uses it to attribute processes (and their
// memory) to the run that owns them, to count what is left of a run's
// process group, and to tell a live process from a newer one that reused
// its pid.
package procfs

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

// Stat is what trainbot reads of one /proc/PID/stat.
type Stat struct {
	PPID  int
	PGID  int
	State byte   // 'R', 'S', 'Z', …
	Start uint64 // clock ticks after boot
	RSS   int64  // pages
	// UTime and STime are the CPU time spent in user and kernel mode,
	// in clock ticks (ClockTicks a second).
	UTime, STime uint64
	VSize        uint64 // virtual memory, bytes
}

// Procs is the host's process table read from /proc at one instant: enough
// of each /proc/PID/stat to attribute a process to a run (parent, process
// group) and to sum a run's resident memory.
type Procs struct {
	root     string
	m        map[int]Stat
	pageSize int64
}

// ReadProcs reads /proc/PID/stat of every process. Processes that end
// while it reads are skipped.
func ReadProcs() (*Procs, error) { return ReadProcsAt("/proc") }

// ReadProcsAt reads a process table from another procfs root (tests).
func ReadProcsAt(root string) (*Procs, error) {
	names, err := readNames(root)
	if err != nil {
		return nil, err
	}
	p := &Procs{root: root, m: make(map[int]Stat, len(names)), pageSize: int64(os.Getpagesize())}
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
		st, err := ParseStat(b)
		if err != nil {
			continue
		}
		p.m[pid] = st
	}
	return p, nil
}

// readNames lists a procfs root (its pid directories and the rest).
func readNames(root string) ([]string, error) {
	d, err := os.Open(root)
	if err != nil {
		return nil, fmt.Errorf("read processes: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, fmt.Errorf("read processes: %w", err)
	}
	return names, nil
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

// ParseStat reads the fields trainbot needs from a /proc/PID/stat line.
// The command name is in parentheses and may contain anything, spaces and
// parentheses included, so the fields start after the last ')'.
func ParseStat(b []byte) (Stat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return Stat{}, errStat
	}
	b = b[i+2:]
	// Field 3 is the state; counting from it: ppid is 1, pgrp 2,
	// utime 11, stime 12, starttime 19, vsize 20, rss 21.
	var p Stat
	for f := 0; f <= 21; f++ {
		j := bytes.IndexByte(b, ' ')
		var tok []byte
		if j < 0 {
			tok, b = bytes.TrimRight(b, "\n"), nil
		} else {
			tok, b = b[:j], b[j+1:]
		}
		if len(tok) == 0 {
			return Stat{}, errStat
		}
		switch f {
		case 0:
			p.State = tok[0]
		case 1:
			p.PPID = atoi(tok)
		case 2:
			p.PGID = atoi(tok)
		case 11:
			p.UTime = uint64(atoi(tok))
		case 12:
			p.STime = uint64(atoi(tok))
		case 19:
			p.Start = uint64(atoi(tok))
		case 20:
			p.VSize = uint64(atoi(tok))
		case 21:
			p.RSS = int64(atoi(tok))
		}
		if b == nil && f < 21 {
			return Stat{}, errStat
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
	return ok && st.State != 'Z'
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
		if id, ok := runs[st.PGID]; ok {
			return id
		}
		if st.PPID == cur {
			return 0
		}
		cur = st.PPID
	}
	return 0
}

// TreeUsage is the resident memory of one run's processes.
type TreeUsage struct {
	RSS   int64 // bytes
	Procs int
	// PIDs are the live processes of the tree, with their start times
	// (a pid and its start name one process: pids are reused).
	PIDs []ProcID
}

// ProcID names one process for as long as the host runs: its pid and when
// it started (clock ticks after boot).
type ProcID struct {
	PID   int
	Start uint64
}

// Usage sums the resident memory and counts the live processes of every
// run's tree, visiting each process once.
func (p *Procs) Usage(runs map[int]int64) map[int64]TreeUsage {
	out := make(map[int64]TreeUsage, len(runs))
	if len(runs) == 0 {
		return out
	}
	owner := make(map[int]int64, len(p.m))
	var path []int
	for pid, st := range p.m {
		if st.State == 'Z' || st.RSS == 0 {
			// A zombie, or a process that is exiting (its memory already
			// released): nothing to count, and a run made only of those
			// is not measured (rather than "0 B" at the end of its chart).
			continue
		}
		id := p.ownerMemo(pid, runs, owner, &path)
		if id == 0 {
			continue
		}
		u := out[id]
		u.RSS += st.RSS * p.pageSize
		u.Procs++
		u.PIDs = append(u.PIDs, ProcID{PID: pid, Start: st.Start})
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
		if v, ok := runs[st.PGID]; ok {
			id = v
			break
		}
		if st.PPID == cur {
			break
		}
		cur = st.PPID
	}
	for _, q := range *path {
		cache[q] = id
	}
	return id
}

// Comm returns a process's command name, "" when it cannot be read.
func (p *Procs) Comm(pid int) string { return comm(p.root, pid) }

// Comm returns the command name of process pid, "" when it cannot be read
// (it ended).
func Comm(pid int) string { return comm("/proc", pid) }

func comm(root string, pid int) string {
	b, err := os.ReadFile(root + "/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// ClockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const ClockTicks = 100

// Started returns when a process started; ok is false when it is not in
// the table or the boot time cannot be read.
func (p *Procs) Started(pid int) (time.Time, bool) {
	st, ok := p.m[pid]
	if !ok {
		return time.Time{}, false
	}
	boot, err := bootTime(p.root)
	if err != nil {
		return time.Time{}, false
	}
	return StartTime(boot, st.Start), true
}

// Children returns the live (not zombie) children of pid.
func (p *Procs) Children(pid int) []int {
	var out []int
	for c, st := range p.m {
		if st.PPID == pid && st.State != 'Z' {
			out = append(out, c)
		}
	}
	return out
}

// Get returns the table's entry for pid.
func (p *Procs) Get(pid int) (Stat, bool) {
	st, ok := p.m[pid]
	return st, ok
}

// Descendants returns the live (not zombie) processes whose parent chain
// reaches root: its children, theirs, and so on — including those that
// left root's process group or session (setsid) and those re-parented to
// root because root is a subreaper.
func (p *Procs) Descendants(root int) []int {
	kids := make(map[int][]int)
	for pid, st := range p.m {
		if pid != root && st.PPID > 0 {
			kids[st.PPID] = append(kids[st.PPID], pid)
		}
	}
	var out []int
	seen := map[int]bool{root: true}
	queue := []int{root}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, c := range kids[cur] {
			if seen[c] {
				continue
			}
			seen[c] = true
			queue = append(queue, c)
			if p.m[c].State != 'Z' {
				out = append(out, c)
			}
		}
	}
	return out
}

// GroupSize counts the live (not zombie) processes of a process group.
func (p *Procs) GroupSize(pgid int) int {
	n := 0
	for _, st := range p.m {
		if st.PGID == pgid && st.State != 'Z' {
			n++
		}
	}
	return n
}

// Empty is a table with no process (when /proc was not read).
func Empty() *Procs { return &Procs{root: "/proc", m: map[int]Stat{}} }

// ReadStat reads one process's /proc/PID/stat.
func ReadStat(pid int) (Stat, error) {
	var buf [1024]byte
	b, err := readSmall([]byte("/proc/"+strconv.Itoa(pid)+"/stat"), buf[:])
	if err != nil {
		return Stat{}, err
	}
	return ParseStat(b)
}

// BootTime is when the host booted (btime of /proc/stat, to the second).
func BootTime() (time.Time, error) { return bootTime("/proc") }

func bootTime(root string) (time.Time, error) {
	b, err := os.ReadFile(root + "/stat")
	if err != nil {
		return time.Time{}, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			sec, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, fmt.Errorf("btime: %w", err)
			}
			return time.Unix(sec, 0), nil
		}
	}
	return time.Time{}, errors.New("no btime in " + root + "/stat")
}

// StartTime converts a process's start (clock ticks after boot) to a time.
func StartTime(boot time.Time, ticks uint64) time.Time {
	return boot.Add(time.Duration(ticks) * time.Second / ClockTicks)
}

// ReadHWM returns a process's high-water mark of resident memory in bytes
// (VmHWM of /proc/PID/status: the most it ever held at once, which
// periodic samples of its RSS miss when the peak is short). ok is false
// for a process that ended, a zombie (its memory is gone) or a kernel
// thread.
func ReadHWM(pid int) (int64, bool) { return readHWM("/proc", pid) }

func readHWM(root string, pid int) (int64, bool) {
	var buf [4096]byte
	b, err := readSmall([]byte(root+"/"+strconv.Itoa(pid)+"/status"), buf[:])
	if err != nil {
		return 0, false
	}
	return parseHWM(b)
}

// parseHWM reads "VmHWM:\t  123456 kB" of a /proc/PID/status text.
func parseHWM(b []byte) (int64, bool) {
	i := bytes.Index(b, []byte("\nVmHWM:"))
	if i < 0 {
		return 0, false
	}
	rest := b[i+len("\nVmHWM:"):]
	if j := bytes.IndexByte(rest, '\n'); j >= 0 {
		rest = rest[:j]
	}
	f := strings.Fields(string(rest))
	if len(f) != 2 || f[1] != "kB" {
		return 0, false
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n << 10, true
}

// WithEnv returns the processes whose environment holds the entry
// key=value (from /proc/PID/environ, as the process started): how the
// processes of a run are found after the process that started them is
// gone, whatever process group or session they moved to. Processes whose
// environment cannot be read (another user's, a kernel thread) are
// skipped; an error means the process table itself could not be read
// (descriptors exhausted, say), and then nothing is known.
func WithEnv(key, value string) ([]int, error) { return withEnv("/proc", key, value) }

func withEnv(root, key, value string) ([]int, error) {
	names, err := readNames(root)
	if err != nil {
		return nil, err
	}
	want := []byte(key + "=" + value + "\x00")
	buf := make([]byte, 256<<10) // the run's variables come last in its environment
	var pids []int
	self := os.Getpid()
	for _, name := range names {
		if name == "" || name[0] < '0' || name[0] > '9' {
			continue
		}
		pid, err := strconv.Atoi(name)
		if err != nil || pid == self {
			continue
		}
		b, err := readSmall([]byte(root+"/"+name+"/environ"), buf)
		switch {
		case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
			return nil, fmt.Errorf("read processes: %w", err)
		case err != nil:
			continue // ended meanwhile, or not ours to read
		}
		if bytes.HasPrefix(b, want) || bytes.Contains(b, append([]byte{0}, want...)) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}
