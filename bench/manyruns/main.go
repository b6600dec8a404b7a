// Command manyruns measures `trainbot serve` with many live runs (#35 goal
// 4): it starts a fake Telegram Bot API and serve with RUNS jobs, starts
// them all (开始 jN), each a child that prints RATE `step=N loss=X` lines a
// second for SECS seconds, and while they run asks 状态 every half second.
// It prints the answers' latency (p50, p99, max), how far the steps 状态
// shows are behind what the children printed (the lag, in seconds of
// output), serve's resident memory (VmRSS sampled every second, VmHWM) and
// its CPU time. The baseline, measured in the same run before the runs
// start, is 状态 of an idle serve: the ratio says what the load costs an
// answer.
//
//	manyruns -trainbot ./trainbot -runs 10 -rate 10000 -secs 60
//
// Run it through bench/manyruns.sh. The children are this binary
// (manyruns child RATE SECS FILE): each writes its own step to FILE ten
// times a second, which is what the lag is measured against.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/trainbot/trainbot/bot/telegram/telegramtest"
)

const (
	token = "123456789:AAE-ManyRuns_benchToken01234567890"
	user  = 111 // who starts the runs; 状态 comes from users too, each in turn
	users = 10  // 111…120: Telegram paces a chat at about a message a second
)

func main() {
	if len(os.Args) == 5 && os.Args[1] == "child" {
		rate, _ := strconv.Atoi(os.Args[2])
		secs, _ := strconv.Atoi(os.Args[3])
		child(rate, secs, os.Args[4])
		return
	}
	bin := flag.String("trainbot", "", "trainbot binary")
	runs := flag.Int("runs", 10, "live runs")
	rate := flag.Int("rate", 10000, "lines a second each run prints")
	secs := flag.Int("secs", 60, "seconds each run prints")
	flag.Parse()
	if *bin == "" || *runs < 1 || *rate < 1 || *secs < 5 {
		fmt.Fprintln(os.Stderr, "usage: manyruns -trainbot BIN [-runs 10] [-rate 10000] [-secs 60]")
		os.Exit(2)
	}
	if err := measure(*bin, *runs, *rate, *secs); err != nil {
		fmt.Fprintln(os.Stderr, "manyruns:", err)
		os.Exit(1)
	}
}

// child prints rate lines a second for secs seconds, in bursts of a
// hundredth of a second; file gets its start time (Unix nanoseconds), from
// which the step it has printed by any time follows.
func child(rate, secs int, file string) {
	w := bufio.NewWriterSize(os.Stdout, 64<<10)
	start := time.Now()
	os.WriteFile(file+".tmp", []byte(strconv.FormatInt(start.UnixNano(), 10)), 0o644)
	os.Rename(file+".tmp", file)
	total := rate * secs
	step := 0
	for step < total {
		due := min(total, int(time.Since(start).Seconds()*float64(rate))+1)
		for ; step < due; step++ {
			w.WriteString("step=")
			w.WriteString(strconv.Itoa(step + 1))
			w.WriteString(" loss=")
			w.WriteString(strconv.FormatFloat(2/math.Sqrt(float64(step+2)), 'f', 5, 64))
			w.WriteByte('\n')
		}
		w.Flush()
		time.Sleep(10 * time.Millisecond)
	}
}

func measure(bin string, runs, rate, secs int) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	dir, err := os.MkdirTemp("", "manyruns")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "data_dir = %q\n[telegram]\napi_endpoint = %q\npoll_timeout = \"1s\"\n[auth]\noperators = [%s]\n", filepath.Join(dir, "data"), fake.URL, userList())
	for i := 1; i <= runs; i++ {
		fmt.Fprintf(&cfg, "[[jobs]]\nname = \"j%d\"\ncommand = [%q, \"child\", \"%d\", \"%d\", %q]\n", i, self, rate, secs, progressFile(dir, i))
	}
	path := filepath.Join(dir, "trainbot.toml")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o600); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--config", path)
	cmd.Env = append(os.Environ(), "TRAINBOT_TELEGRAM_TOKEN="+token)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	pid := cmd.Process.Pid
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}()
	if !fake.Await(time.Minute, func() bool { return len(fake.Commands()) > 0 }) {
		return fmt.Errorf("serve did not start; stderr:\n%s", stderr.String())
	}

	// The baseline: 状态 of an idle serve, and its CPU time.
	idleCPU0, idleFrom := cpuTime(pid), time.Now()
	var idle []time.Duration
	for range 40 {
		d, _, err := ask(fake, int64(user+1+len(idle)%users), "状态")
		if err != nil {
			return fmt.Errorf("%w; stderr:\n%s", err, stderr.String())
		}
		idle = append(idle, d)
		time.Sleep(200 * time.Millisecond)
	}

	idleCPU := (cpuTime(pid) - idleCPU0).Seconds() / time.Since(idleFrom).Seconds() // a second's
	cpu0 := cpuTime(pid)
	for i := 1; i <= runs; i++ {
		if _, text, err := ask(fake, user, fmt.Sprintf("开始 j%d", i)); err != nil || !strings.Contains(text, "#") {
			return fmt.Errorf("开始 j%d: %q, %v; stderr:\n%s", i, text, err, stderr.String())
		}
	}
	began := time.Now()
	var mu sync.Mutex
	var rss []int
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // serve's memory every second
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				mu.Lock()
				rss = append(rss, statusKB(pid, "VmRSS"))
				mu.Unlock()
			}
		}
	}()
	var busy []time.Duration
	var lags []float64
	stepRE := regexp.MustCompile(`#(\d+)[^\n]*?(?:\n[^#\n]*)*?step (\d+)`)
	starts := map[int]time.Time{}
	for i := 1; i <= runs; i++ {
		starts[i] = readStart(progressFile(dir, i))
	}
	for n := 0; time.Since(began) < time.Duration(secs-2)*time.Second; n++ {
		asked := time.Now()
		d, text, err := ask(fake, int64(user+1+n%users), "状态")
		if err != nil {
			return fmt.Errorf("%w; stderr:\n%s", err, stderr.String())
		}
		busy = append(busy, d)
		if time.Since(began) > 5*time.Second { // once every run prints
			for _, m := range stepRE.FindAllStringSubmatch(text, -1) {
				id, _ := strconv.Atoi(m[1])
				step, _ := strconv.Atoi(m[2])
				if start, ok := starts[id]; ok && !start.IsZero() {
					printed := min(float64(rate*secs), asked.Sub(start).Seconds()*float64(rate))
					lags = append(lags, max(0, printed-float64(step))/float64(rate))
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	close(stop)
	<-done
	cpu := cpuTime(pid) - cpu0
	// The runs end by themselves; serve and the directory go after them.
	time.Sleep(time.Until(began.Add(time.Duration(secs+3) * time.Second)))
	hwm := statusKB(pid, "VmHWM")
	if len(lags) == 0 {
		return fmt.Errorf("no step in any 状态 answer; the last:\n%s", fake.Messages(user)[len(fake.Messages(user))-1].Text)
	}
	slices.Sort(idle)
	slices.Sort(busy)
	slices.Sort(lags)
	fmt.Printf("%d runs x %d lines/s for %d s (%d lines), %d 状态 asked while they ran\n", runs, rate, secs, runs*rate*secs, len(busy))
	fmt.Printf("状态 idle (baseline): p50 %s, p99 %s\n", q(idle, 0.5), q(idle, 0.99))
	fmt.Printf("状态 with %d live runs: p50 %s, p99 %s, max %s; p99 ratio to idle %.2fx (goal: p99 <= 50 ms)\n",
		runs, q(busy, 0.5), q(busy, 0.99), busy[len(busy)-1], float64(q(busy, 0.99))/float64(q(idle, 0.99)))
	fmt.Printf("lag of the steps 状态 shows behind the children's output: p50 %.2f s, p99 %.2f s, max %.2f s over %d readings (goal: <= 1 s)\n",
		lags[len(lags)/2], lags[min(len(lags)-1, int(float64(len(lags))*0.99))], lags[len(lags)-1], len(lags))
	mu.Lock()
	maxRSS := slices.Max(append(rss, 0))
	mu.Unlock()
	fmt.Printf("serve memory: VmRSS max %.1f MB (sampled each second), VmHWM %.1f MB (goal: <= 150 MB)\n", float64(maxRSS)/1024, float64(hwm)/1024)
	span := time.Since(began).Seconds()
	fmt.Printf("serve CPU while the runs printed: %.2f s in %.1f s (%.0f %% of a core; idle: %.0f %%), %.2f µs a line above idle\n",
		cpu.Seconds(), span, 100*cpu.Seconds()/span, 100*idleCPU, (cpu.Seconds()-idleCPU*span)*1e6/(span*float64(runs*rate)))
	return nil
}

// ask sends text as from and waits for the first message to from after it.
func ask(fake *telegramtest.Server, from int64, text string) (time.Duration, string, error) {
	before := len(fake.Messages(from))
	t := time.Now()
	fake.UserSays(from, text)
	var got string
	if !fake.Await(30*time.Second, func() bool {
		ms := fake.Messages(from)
		if len(ms) <= before {
			return false
		}
		got = ms[before].Text
		return true
	}) {
		return 0, "", fmt.Errorf("no answer to %s in 30 s", text)
	}
	return time.Since(t), got, nil
}

func q(ds []time.Duration, p float64) time.Duration {
	return ds[min(len(ds)-1, int(float64(len(ds))*p))].Round(100 * time.Microsecond)
}

func progressFile(dir string, i int) string { return filepath.Join(dir, fmt.Sprintf("printed-%d", i)) }

func userList() string {
	var ids []string
	for i := range users + 1 {
		ids = append(ids, strconv.Itoa(user+i))
	}
	return strings.Join(ids, ", ")
}

// readStart is when a child began, from its file (zero if not yet).
func readStart(file string) time.Time {
	b, _ := os.ReadFile(file)
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// statusKB is a field of /proc/PID/status in kB.
func statusKB(pid int, field string) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, _ := strconv.Atoi(strings.Fields(v + " 0")[0])
			return n
		}
	}
	return 0
}

// cpuTime is the process's utime+stime (/proc/PID/stat, clock ticks of
// 10 ms).
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.Atoi(f[11])
	st, _ := strconv.Atoi(f[12])
	return time.Duration(ut+st) * 10 * time.Millisecond
}
