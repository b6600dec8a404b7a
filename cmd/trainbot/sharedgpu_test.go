//go:build cgo && !nonvml

package main

import (
	"context"
	"fmt"
	"os"
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
	openGPU = func() (gpu.Backend, error) {
		n, err := gpu.OpenNVML(host)
		if err != nil {
			return gpu.Unavailable(err), err
		}
		return n, nil
	}
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
	sout, serr := &syncBuffer{}, &syncBuffer{}
	e := env{stdin: strings.NewReader(""), stdout: sout, stderr: serr, exe: os.Args[0], environ: []string{"HOME=" + dir}}
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve", "--config", cfg}, e) }()
	var ex *exampleTransport
	select {
	case ex = <-exampleOpened:
	case c := <-done:
		t.Fatalf("serve ended with %d:\n%s", c, serr.String())
	case <-time.After(time.Minute):
		t.Fatalf("serve did not open the example transport:\n%s", serr.String())
	}
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
	n = ex.await(t, chat, n, "run #2 started", serr)
	t.Logf("the queued start began %s after GPU 6 was released (free_for 500ms, [gpu] interval 100ms, the queue's retry 2s; run #1 held GPUs 3 and 7 for 2s)", time.Since(released).Round(10*time.Millisecond))
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
