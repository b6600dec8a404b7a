package gpulock

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Two processes racing for one GPU: exactly one wins, the other is told
// who holds it — for a lock file that the race creates, and for one that
// exists.
func TestTryLockRaceBetweenProcesses(t *testing.T) {
	d := newDir(t)
	prevWinner := ""
	for r := 0; r < 12; r++ {
		uuid := fmt.Sprintf("GPU-race-%d", r/2) // raced twice: created, then existing
		if r%2 == 0 {
			prevWinner = ""
		}
		names := []string{fmt.Sprintf("a%d", r), fmt.Sprintf("b%d", r)}
		var ps []*proc
		for _, n := range names {
			ps = append(ps, startHelper(t, "race", n, d.Path(), uuid))
		}
		for _, p := range ps {
			io.WriteString(p.in, "go\n")
		}
		got := []string{ps[0].line(t), ps[1].line(t)}
		winner, loser := -1, -1
		for i, g := range got {
			switch {
			case g == "won" && winner < 0:
				winner = i
			case strings.HasPrefix(g, "held ") && loser < 0:
				loser = i
			}
		}
		if winner < 0 || loser < 0 {
			t.Fatalf("round %d: %s said %q, %s said %q: want one winner and one told it is held", r, names[0], got[0], names[1], got[1])
		}
		// The loser may have read the file before the winner wrote itself
		// in: then it names the winner before, or nobody.
		if named, _ := strconv.Unquote(strings.TrimPrefix(got[loser], "held ")); named != names[winner] && named != prevWinner && named != "" {
			t.Errorf("round %d: the loser was told %q holds it, want %q", r, named, names[winner])
		}
		hs, err := d.Holders()
		if err != nil {
			t.Fatal(err)
		}
		if h := hs[uuid]; !h.Held || h.Holder.Job != names[winner] || h.Holder.UUID != uuid {
			t.Errorf("round %d while held: %+v, want held by %s", r, h, names[winner])
		}
		for _, p := range ps {
			p.end(t)
		}
		hs, err = d.Holders()
		if err != nil {
			t.Fatal(err)
		}
		if h := hs[uuid]; h.Taken() || h.Holder.Job != names[winner] {
			t.Errorf("round %d after the end: %+v, want free, last held by %s", r, h, names[winner])
		}
		prevWinner = names[winner]
	}
}

// 10 processes take one GPU each among 4, again and again: never two
// holders of a GPU at once (each holder marks the GPU occupied with an
// O_EXCL file while it holds it).
func TestLockAllTenProcesses(t *testing.T) {
	d := newDir(t)
	uuids := []string{"GPU-0000", "GPU-1111", "GPU-2222", "GPU-3333"}
	const workers, rounds = 10, 30
	var ps []*proc
	for i := 0; i < workers; i++ {
		ps = append(ps, startHelper(t, "worker", strconv.Itoa(i), append([]string{d.Path(), strconv.Itoa(rounds)}, uuids...)...))
	}
	for _, p := range ps {
		io.WriteString(p.in, "go\n")
	}
	total := map[string]int{}
	for i, p := range ps {
		line := p.line(t)
		js, ok := strings.CutPrefix(line, "wins ")
		if !ok {
			t.Fatalf("worker %d: %s", i, line)
		}
		var wins map[string]int
		if err := json.Unmarshal([]byte(js), &wins); err != nil {
			t.Fatalf("worker %d: %q: %v", i, line, err)
		}
		for u, n := range wins {
			total[u] += n
		}
		p.end(t)
	}
	sum := 0
	for _, u := range uuids {
		if total[u] == 0 {
			t.Errorf("%s was never won: %v", u, total)
		}
		sum += total[u]
	}
	t.Logf("%d processes × %d rounds on %d GPUs: %d locks taken %v", workers, rounds, len(uuids), sum, total)
	hs, err := d.Holders()
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range uuids {
		if hs[u].Taken() {
			t.Errorf("%s after every worker ended: %+v", u, hs[u])
		}
	}
}

// The same in one process, 10 goroutines taking 2 GPUs at a time (an
// flock is the open file description's, so they exclude each other as
// processes do): all or nothing, never two holders.
func TestLockAllGoroutines(t *testing.T) {
	d := newDir(t)
	uuids := []string{"GPU-d", "GPU-c", "GPU-b", "GPU-a"}
	occ := newOccupancy(filepath.Join(t.TempDir(), "occupied"))
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	var mu sync.Mutex
	total := 0
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wins, err := work(d, uuids, 2, 20, i, Holder{Job: strconv.Itoa(i)}, occ)
			if err != nil {
				errs <- fmt.Errorf("goroutine %d: %w", i, err)
			}
			mu.Lock()
			for _, n := range wins {
				total += n
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if total == 0 {
		t.Error("no lock was ever taken")
	}
	hs, err := d.Holders()
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range uuids {
		if hs[u].Taken() {
			t.Errorf("%s after the end: %+v", u, hs[u])
		}
	}
}

// LockAll takes nothing when one GPU is held, and puts back what the
// files it took said before.
func TestLockAllIsAllOrNothing(t *testing.T) {
	d := newDir(t)
	f, err := d.TryLock("GPU-1", Holder{Job: "earlier", Run: 3})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	other := startHelper(t, "hold", "other", d.Path(), "GPU-2")
	if line := other.line(t); line != "locked" {
		t.Fatal(line)
	}
	_, err = LockAll(d, []string{"GPU-3", "GPU-1", "GPU-0", "GPU-2"}, Holder{Job: "mine", Run: 9})
	var held *HeldError
	if !errors.As(err, &held) || held.UUID != "GPU-2" || held.Holder.Job != "other" || held.Orphan {
		t.Fatalf("LockAll with GPU-2 held: %v, want GPU-2 held by other", err)
	}
	hs, err := d.Holders()
	if err != nil {
		t.Fatal(err)
	}
	if h := hs["GPU-1"]; h.Taken() || h.Holder.Job != "earlier" || h.Holder.Run != 3 {
		t.Errorf("GPU-1 after the refusal: %+v, want free, its earlier holder put back", h)
	}
	if h := hs["GPU-0"]; h.Taken() || h.Holder.Job != "" || h.HolderErr == nil {
		t.Errorf("GPU-0 after the refusal: %+v, want free and empty (made by LockAll, given back)", h)
	}
	if h, ok := hs["GPU-3"]; ok {
		t.Errorf("GPU-3 after the refusal: %+v, want untouched (after GPU-2 in the order)", h)
	}
	if h := hs["GPU-2"]; !h.Held || h.Holder.Job != "other" {
		t.Errorf("GPU-2: %+v, want held by other", h)
	}

	files, err := LockAll(d, []string{"GPU-3", "GPU-1"}, Holder{Job: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || filepath.Base(files[0].Name()) != "GPU-3.lock" || filepath.Base(files[1].Name()) != "GPU-1.lock" {
		t.Errorf("files %v, want GPU-3's then GPU-1's (the order asked)", files)
	}
	for _, f := range files {
		f.Close()
	}
	if _, err := LockAll(d, []string{"GPU-1", "GPU/1", "GPU-1"}, Holder{}); err == nil || errors.As(err, &held) {
		t.Errorf("LockAll of one GPU twice: %v, want an error that is not HeldError", err)
	}
	other.end(t)
}

// Holders tells held, free and orphan-held locks apart, the last with
// the pid's reuse and a group that outlived its leader.
func TestHolders(t *testing.T) {
	d := newDir(t)
	lock := func(uuid string, h Holder) {
		t.Helper()
		f, err := d.TryLock(uuid, h)
		if err != nil {
			t.Fatalf("lock %s: %v", uuid, err)
		}
		f.Close()
	}
	// A live process, one that ended, a zombie, and a group whose
	// leader is gone but whose member lives.
	live := startSleep(t)
	liveStart, err := procStart(live)
	if err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("sleep", "60")
	if err := dead.Start(); err != nil {
		t.Fatal(err)
	}
	deadStart, err := procStart(dead.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	dead.Process.Kill()
	dead.Wait()
	zombie := exec.Command("true")
	zombie.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	zr := &reaper{cmd: zombie}
	t.Cleanup(zr.wait)
	waitFor(t, 10*time.Second, "a zombie", func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", zombie.Process.Pid))
		return strings.Contains(string(b), ") Z ")
	})
	leaderGone := startLeaderless(t)

	held := startHelper(t, "hold", "held-by-helper", d.Path(), "GPU-held")
	if line := held.line(t); line != "locked" {
		t.Fatal(line)
	}
	lock("GPU-free", Holder{Job: "done", Run: 1})
	lock("GPU-dead", Holder{Job: "ended", PID: dead.Process.Pid, PIDStart: deadStart})
	lock("GPU-orphan", Holder{Job: "orphan", PID: live}) // PIDStart filled
	lock("GPU-reused", Holder{Job: "reused", PID: live, PIDStart: liveStart + 1000})
	lock("GPU-zombie", Holder{Job: "zombie", PID: zombie.Process.Pid})
	lock("GPU-group", Holder{Job: "group", PID: leaderGone})
	lock("GPU-elsewhere", Holder{Job: "elsewhere", PID: live, Host: "another-host"})
	lock("MIG-GPU-1/2/0", Holder{Job: "mig"})
	os.WriteFile(filepath.Join(d.Path(), "GPU-junk.lock"), []byte("not json\n"), 0o666)
	os.WriteFile(filepath.Join(d.Path(), "README"), []byte("x"), 0o666)
	os.Symlink("/etc/passwd", filepath.Join(d.Path(), "GPU-link.lock"))

	hs, err := d.Holders()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		uuid         string
		job          string
		held, orphan bool
	}{
		{"GPU-held", "held-by-helper", true, false},
		{"GPU-free", "done", false, false},
		{"GPU-dead", "ended", false, false},
		{"GPU-orphan", "orphan", false, true},
		{"GPU-reused", "reused", false, false},
		{"GPU-zombie", "zombie", false, false},
		{"GPU-group", "group", false, true},
		{"GPU-elsewhere", "elsewhere", false, false},
		{"MIG-GPU-1/2/0", "mig", false, false},
		{"GPU-junk", "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.uuid, func(t *testing.T) {
			h, ok := hs[tt.uuid]
			if !ok {
				t.Fatalf("not in Holders: %v", hs)
			}
			if h.Held != tt.held || h.Orphan != tt.orphan || h.Holder.Job != tt.job {
				t.Errorf("got held %v orphan %v job %q (%+v), want %v %v %q", h.Held, h.Orphan, h.Holder.Job, h, tt.held, tt.orphan, tt.job)
			}
			if (tt.job == "") != (h.HolderErr != nil) {
				t.Errorf("holder error %v", h.HolderErr)
			}
			// TryLock agrees.
			f, err := d.TryLock(tt.uuid, Holder{Job: "probe"})
			var he *HeldError
			switch {
			case tt.held || tt.orphan:
				if !errors.As(err, &he) || he.Orphan != tt.orphan || he.Holder.Job != tt.job || he.UUID != tt.uuid {
					t.Errorf("TryLock: %v, want held (orphan %v) by %q", err, tt.orphan, tt.job)
				}
			case err != nil:
				t.Errorf("TryLock: %v, want it taken", err)
			default:
				f.Close()
			}
		})
	}
	if len(hs) != len(tests) {
		t.Errorf("%d holdings, want %d (README and a symbolic link are no locks): %v", len(hs), len(tests), hs)
	}
	if h := hs["GPU-orphan"].Holder; h.PIDStart != liveStart || h.PID != live {
		t.Errorf("orphan's holder %+v, want pid %d started at %d", h, live, liveStart)
	}
	// The orphan's process ends: the GPU is free.
	syscall.Kill(-live, syscall.SIGKILL)
	waitFor(t, 10*time.Second, "the orphan's end", func() bool { return !lives(live, liveStart) })
	f, err := d.TryLock("GPU-orphan", Holder{Job: "next"})
	if err != nil {
		t.Fatalf("TryLock after the orphan ended: %v", err)
	}
	f.Close()
	held.end(t)
	if hs, _ := d.Holders(); hs["GPU-held"].Taken() {
		t.Errorf("GPU-held after its holder ended: %+v", hs["GPU-held"])
	}
}

// startSleep starts `sleep 60` in a process group of its own and
// returns its pid; it is killed and reaped when the test ends.
func startSleep(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	return cmd.Process.Pid
}

// startLeaderless starts a process group whose leader exits (reaped) while
// a member sleeps on, and returns the group id; the member is killed when
// the test ends.
func startLeaderless(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) })
	member, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	if _, err := procStart(member); err != nil || member <= 0 {
		t.Fatalf("the group's member %q: %v", out, err)
	}
	return pgid
}

// A Holders probe in a loop never makes a TryLock of a free GPU fail.
func TestProbesDoNotRefuseTakers(t *testing.T) {
	d := newDir(t)
	f, err := d.TryLock("GPU-p", Holder{})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				done <- n
				return
			default:
			}
			d.Holders()
			n++
		}
	}()
	for i := 0; i < 300; i++ {
		f, err := d.TryLock("GPU-p", Holder{Run: int64(i)})
		if err != nil {
			close(stop)
			<-done
			t.Fatalf("TryLock %d while probed: %v", i, err)
		}
		f.Close()
	}
	close(stop)
	if n := <-done; n == 0 {
		t.Error("the prober never ran")
	}
}

func TestUpdateAndSetPID(t *testing.T) {
	d := newDir(t)
	f, err := d.TryLock("GPU-u", Holder{Run: 4, Job: "train", User: "alice", UID: 1000, DataDir: "/data"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	first := readFile(t, f.Name())
	if first.UUID != "GPU-u" || first.Since.IsZero() || first.Host != hostname() || first.PID != 0 {
		t.Errorf("holder written %+v, want uuid, since and host filled, no pid", first)
	}
	// The file was made 0666 whatever the umask (the test's is 022 or so).
	if fi, err := os.Stat(f.Name()); err != nil || fi.Mode().Perm() != 0o666 {
		t.Errorf("lock file mode %v (%v), want 0666", fi.Mode(), err)
	}
	live := startSleep(t)
	start, _ := procStart(live)
	if err := d.Update(f, Holder{Run: 4, Job: "train", User: "alice", PID: live}); err != nil {
		t.Fatal(err)
	}
	got := readFile(t, f.Name())
	if got.PID != live || got.PIDStart != start || got.UUID != "GPU-u" || !got.Since.Equal(first.Since) {
		t.Errorf("after Update: %+v, want pid %d start %d, uuid and since kept", got, live, start)
	}
	if err := SetPID(f, os.Getpid()); err != nil {
		t.Fatal(err)
	}
	me, _ := procStart(os.Getpid())
	got = readFile(t, f.Name())
	if got.PID != os.Getpid() || got.PIDStart != me || got.User != "alice" || got.Run != 4 {
		t.Errorf("after SetPID: %+v, want this process, the rest kept", got)
	}
	// A file that holds no holder (a job's lock) is left alone.
	other, err := os.OpenFile(filepath.Join(t.TempDir(), "job.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	other.WriteString(`{"what":"run #3","run":3}` + "\n")
	if err := SetPID(other, 42); !errors.Is(err, ErrNotHolder) {
		t.Errorf("SetPID of a job's lock: %v, want ErrNotHolder", err)
	}
	if b, _ := os.ReadFile(other.Name()); string(b) != `{"what":"run #3","run":3}`+"\n" {
		t.Errorf("the job's lock was changed: %q", b)
	}
}

func readFile(t *testing.T, path string) Holder {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := parseHolder(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return h
}

// A lock file that is a symbolic link, a hard link or a FIFO is refused,
// at once.
func TestStrangeLockFilesAreRefused(t *testing.T) {
	d := newDir(t)
	target := filepath.Join(t.TempDir(), "precious")
	os.WriteFile(target, []byte("keep me"), 0o644)
	os.Symlink(target, filepath.Join(d.Path(), "GPU-sym.lock"))
	os.Link(target, filepath.Join(d.Path(), "GPU-hard.lock"))
	unix.Mkfifo(filepath.Join(d.Path(), "GPU-fifo.lock"), 0o666)
	for _, c := range []struct{ uuid, want string }{
		{"GPU-sym", "symbolic link"},
		{"GPU-hard", "2 links"},
		{"GPU-fifo", "not a regular file"},
	} {
		done := make(chan error, 1)
		go func() {
			f, err := d.TryLock(c.uuid, Holder{})
			if f != nil {
				f.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), d.Path()) {
				t.Errorf("%s: %v, want %q and the path", c.uuid, err, c.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: TryLock blocked", c.uuid)
		}
	}
	if b, _ := os.ReadFile(target); string(b) != "keep me" {
		t.Errorf("the linked file was changed: %q", b)
	}
	hs, err := d.Holders() // the FIFO does not block it either
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := hs["GPU-sym"]; ok {
		t.Errorf("a symbolic link among the holdings: %+v", hs)
	}
}
