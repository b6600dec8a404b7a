//go:build cgo && !nonvml

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/messengers"
	"github.com/trainbot/trainbot/gpu"
	"github.com/trainbot/trainbot/internal/nvmltest"
)

// Shared GPUs from the chat, through serve, on go-nvml's mock DGX (8 GPUs,
// 3 busy with another user's process): 开始 train gpus=2 gets the two
// free ones with the most memory; gpus=6 is refused with what holds each
// GPU and a queue hint, queued, and started once the first run ended and
// a released GPU has been quiet for free_for; 通知空闲 tells the chat
// when GPUs are free.
func TestSharedGPUsFromTheChat(t *testing.T) {
	host := nvmltest.NewHost()
	for i, used := range []uint64{5, 0, 2, 0, 0, 3, 0, 1} {
		host.Used(i, used*nvmltest.GiB)
	}
	for _, i := range []int{1, 4, 6} {
		host.Foreign(i, 10*nvmltest.GiB)
	}
	openGPU = mockGPU(host)
	transports = append(messengers.All(), exampleKind)
	t.Cleanup(func() { openGPU, transports = gpu.Open, messengers.All() })

	dir := t.TempDir()
	cfg := filepath.Join(dir, "trainbot.toml")
	job := func(name, sleep string) string {
		return fmt.Sprintf("[[jobs]]\nname = %q\ncommand = [\"sh\", \"-c\", \"echo visible=$CUDA_VISIBLE_DEVICES order=$CUDA_DEVICE_ORDER; sleep %s\"]\n", name, sleep)
	}
	text := fmt.Sprintf("data_dir = %q\n[example]\ntoken = \"t\"\nlanguage = \"en\"\n[auth]\nexample_operators = [\"ana\"]\n"+
		"[gpu]\ninterval = \"100ms\"\nfree_for = \"500ms\"\nlock_dir = %q\n", filepath.Join(dir, "data"), filepath.Join(dir, "locks")) +
		job("train", "2") + job("big", "0")
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ex, done, serr := serveExample(t, ctx, cfg, []string{"HOME=" + dir})
	const chat = 5
	ex.says(chat, "ana", "通知空闲 2")
	n := ex.await(t, chat, 0, "2 GPUs free now", serr) // once they have been quiet for free_for
	ex.says(chat, "ana", "开始 train gpus=2")
	n = ex.await(t, chat, n, "run #1 started", serr)
	ex.await(t, chat, n-1, "GPUs: 3, 7 (", serr)
	if log := waitFile(t, filepath.Join(dir, "data", "runs", "1", "output.log"), "visible="); !strings.Contains(log, "visible=3,7 order=PCI_BUS_ID") {
		t.Errorf("the run sees %q, want GPUs 3 and 7 in PCI order", log)
	}
	ex.says(chat, "ana", "开始 big gpus=6")
	n = ex.await(t, chat, n, "Not enough free GPUs", serr)
	refusal := ex.reply(chat, n-1)
	for _, want := range []string{"GPU 1: root's process 1", "GPU 3: taken by run #1 (train, started by", "GPU 0: free", "排队 big gpus=6"} {
		if !strings.Contains(refusal, want) {
			t.Errorf("the refusal lacks %q:\n%s", want, refusal)
		}
	}
	ex.says(chat, "ana", "排队 big gpus=6")
	n = ex.await(t, chat, n, "queued #", serr)
	host.Release(6)
	released := time.Now()
	ex.await(t, chat, n, "run #2 started", serr)
	t.Logf("the queued start began %s after GPU 6 was released, once run #1 (2 s) let GPUs 3 and 7 go", time.Since(released).Round(10*time.Millisecond))
	if log := waitFile(t, filepath.Join(dir, "data", "runs", "2", "output.log"), "visible="); !strings.Contains(log, "visible=0,2,3,5,6,7 order=PCI_BUS_ID") {
		t.Errorf("the queued run sees %q", log)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop")
	}
}

// waitFile waits up to 10 s for path to contain want and returns it.
func waitFile(t *testing.T, path, want string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), want) || time.Now().After(deadline) {
			return string(b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// init makes the test binary, run as trainbot (TRAINBOT_TEST_MAIN=1), see
// the mock DGX with the GPUs TRAINBOT_TEST_MOCK_GPUS lists ("4,5,6,7")
// busy with another user's process.
func init() {
	busy, ok := os.LookupEnv("TRAINBOT_TEST_MOCK_GPUS")
	if !ok {
		return
	}
	host := nvmltest.NewHost()
	for _, f := range strings.Split(busy, ",") {
		var i int
		if _, err := fmt.Sscan(f, &i); err == nil {
			host.Foreign(i, 10*nvmltest.GiB)
		}
	}
	openGPU = mockGPU(host)
}

// mockGPU opens the mock host's NVML in place of the system's.
func mockGPU(host *nvmltest.Host) func() (gpu.Backend, error) {
	return func() (gpu.Backend, error) {
		n, err := gpu.OpenNVML(host)
		if err != nil {
			return gpu.Unavailable(err), err
		}
		return n, nil
	}
}

// Two trainbot processes, each with its own data directory, share the
// host's lock directory: of 10 starts of gpus=1 (5 in each, as fast as
// each console takes them) on 4 free GPUs, 4 start on distinct GPUs, as
// the children's environments say, and the others are told to wait.
func TestTwoTrainbotProcessesNeverShareAGPU(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	lockDir := filepath.Join(dir, "locks")
	type proc struct {
		data   string
		cmd    *exec.Cmd
		stdin  io.WriteCloser
		stdout *syncBuffer
	}
	var procs []*proc
	for p := range 2 {
		data := filepath.Join(dir, fmt.Sprintf("data%d", p))
		var text strings.Builder
		fmt.Fprintf(&text, "data_dir = %q\n[gpu]\ninterval = \"100ms\"\nfree_for = \"0s\"\nlock_dir = %q\n", data, lockDir)
		for j := range 5 {
			fmt.Fprintf(&text, "[[jobs]]\nname = \"j%d\"\ngpus = 1\ncommand = [\"sh\", \"-c\", \"echo visible=$CUDA_VISIBLE_DEVICES; sleep 4\"]\n", p*5+j)
		}
		cfg := filepath.Join(dir, fmt.Sprintf("c%d.toml", p))
		if err := os.WriteFile(cfg, []byte(text.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(exe, "console", "--config", cfg)
		cmd.Env = append(os.Environ(), "TRAINBOT_TEST_MAIN=1", "TRAINBOT_TEST_MOCK_GPUS=4,5,6,7", "HOME="+dir)
		pr := &proc{data: data, cmd: cmd, stdout: &syncBuffer{}}
		cmd.Stdout, cmd.Stderr = pr.stdout, pr.stdout
		if pr.stdin, err = cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		procs = append(procs, pr)
	}
	// The starts go in once both have sampled their GPUs (free_for 0s).
	time.Sleep(time.Second)
	for p, pr := range procs {
		var starts strings.Builder
		for j := range 5 {
			fmt.Fprintf(&starts, "开始 j%d\n", p*5+j)
		}
		if _, err := io.WriteString(pr.stdin, starts.String()); err != nil {
			t.Fatal(err)
		}
	}
	// Every start is answered: started, or told to wait for GPUs.
	deadline := time.Now().Add(time.Minute)
	count := func(s string) int {
		n := 0
		for _, pr := range procs {
			n += strings.Count(pr.stdout.String(), s)
		}
		return n
	}
	for count("▶️ run #")+count("Not enough free GPUs") < 10 {
		if time.Now().After(deadline) {
			t.Fatalf("not every start was answered:\n%s\n---\n%s", procs[0].stdout.String(), procs[1].stdout.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	seen := map[string]string{}
	started := 0
	for p, pr := range procs {
		for id := 1; id <= 5; id++ {
			path := filepath.Join(pr.data, "runs", fmt.Sprint(id), "output.log")
			if _, err := os.Stat(path); err != nil {
				continue // no such run: that start waits
			}
			started++
			v := waitFile(t, path, "visible=")
			line := ""
			for _, l := range strings.Split(v, "\n") {
				if strings.HasPrefix(l, "visible=") {
					line = l
				}
			}
			who := fmt.Sprintf("trainbot %d run %d", p, id)
			if line == "" || line == "visible=" {
				t.Errorf("%s sees no GPU: %q", who, v)
			}
			if other, dup := seen[line]; dup {
				t.Errorf("%s and %s both see %q", other, who, line)
			}
			seen[line] = who
		}
	}
	if started != 4 || count("Not enough free GPUs") != 6 {
		t.Errorf("%d runs started and %d told to wait, want 4 and 6:\n%s\n---\n%s", started, count("Not enough free GPUs"), procs[0].stdout.String(), procs[1].stdout.String())
	}
	for _, pr := range procs {
		pr.stdin.Close()
	}
	for _, pr := range procs {
		done := make(chan error, 1)
		go func() { done <- pr.cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Error("a trainbot did not end after its input did")
		}
	}
}
