package remote_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainbot/trainbot/gpu"
	"github.com/trainbot/trainbot/gpu/remote"
	"github.com/trainbot/trainbot/hosts"
	"github.com/trainbot/trainbot/internal/sshdtest"
)

// fakeTrainbot is a remote trainbot (a shell script) that answers
// `version --json` with the hub's protocol and `gpu --json` with the
// contents of the file it returns, which the test rewrites.
func fakeTrainbot(t *testing.T) (bin, answer string) {
	t.Helper()
	dir := t.TempDir()
	bin, answer = filepath.Join(dir, "trainbot"), filepath.Join(dir, "answer")
	script := fmt.Sprintf("#!/bin/sh\ncase \"$1\" in\nversion) echo '{\"version\":\"v0.0.0\",\"protocol\":%d}' ;;\ngpu) cat %q ;;\nesac\n", hosts.Protocol, answer)
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, answer
}

func writeAnswer(t *testing.T, file, text string) {
	t.Helper()
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil { // never half an answer
		t.Fatal(err)
	}
}

func startHost(t *testing.T, name string, s *sshdtest.Server, bin string) *hosts.Host {
	t.Helper()
	kh := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(kh, []byte(s.KnownHostsLine()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := &hosts.Host{Target: &hosts.Target{Name: name, Address: s.Addr, User: s.User, IdentityFile: s.ClientKey.File, KnownHosts: kh, Trainbot: bin},
		Hub: hosts.Version{Protocol: hosts.Protocol}}
	h.Start(t.Context())
	t.Cleanup(h.Close)
	return h
}

// waitFor waits up to 30 s for the host's sample to satisfy ok.
func waitFor(t *testing.T, s *remote.Sampler, what string, ok func(gpu.HostSample) bool) gpu.HostSample {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		changed := s.Changed()
		if hs := s.Samples()[0]; ok(hs) {
			return hs
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no sample %s in 30 s: %+v", what, s.Samples()[0])
		}
	}
}

const hot = `{"available":true,"reason":"","driver_version":"550.1","sampled_at":"2026-12-01T10:00:00Z",
"devices":[{"index":1,"name":"NVIDIA H100","uuid":"GPU-1","memory_used_bytes":2048,"memory_reserved_bytes":1024,"memory_total_bytes":8192,
"utilization_percent":7,"memory_utilization_percent":null,"temperature_c":91,"power_draw_watts":250.5,"power_limit_watts":700}],
"processes":[{"pid":42,"device":1,"name":"python","memory_used_bytes":1024,"run_id":3,"uid":1000,"user":"ana","command":"python train.py","utilization_percent":null}],
"host":{"memory_total_bytes":100,"memory_available_bytes":40,"memory_used_bytes":60},
"runs":[{"run_id":3,"pid":42,"gpu_mem_bytes":1024,"gpu_total_bytes":8192,"devices":[1],"host_mem_bytes":5,"processes":1}],"error":""}`

// A host's answer is kept with its figures (the host's run ids dropped)
// and its alerts name it; an answer that is no sample, then a dead
// connection, make it unreachable since the first try that failed, and
// it answers again once it can.
func TestSamplerKeepsAnswersAndSinceWhenNone(t *testing.T) {
	srv := sshdtest.Start(t, sshdtest.Options{})
	bin, answer := fakeTrainbot(t)
	writeAnswer(t, answer, hot)
	h := startHost(t, "gpu2", srv, bin)
	var mu sync.Mutex
	var alerts []gpu.Alert
	s := remote.New(remote.Options{Hosts: []*hosts.Host{h}, Interval: 50 * time.Millisecond, Timeout: 2 * time.Second,
		Thresholds: gpu.Thresholds{TempC: 85}, Alert: func(a gpu.Alert) {
			mu.Lock()
			defer mu.Unlock()
			alerts = append(alerts, a)
		}})
	if got := s.Samples(); len(got) != 1 || got[0].Host != "gpu2" || !got[0].Snapshot.At.IsZero() || got[0].Unreachable != nil {
		t.Fatalf("before the first sample: %+v", got)
	}
	s.Start()
	defer s.Close()

	hs := waitFor(t, s, "answered", func(hs gpu.HostSample) bool { return !hs.Snapshot.At.IsZero() })
	snap := hs.Snapshot
	d := snap.Devices[0]
	if d.Index != 1 || d.MemUsed != 1024 || d.MemReserved != 1024 || d.MemTotal != 8192 || d.Util != 7 || d.MemUtil != -1 || d.TempC != 91 ||
		d.PowerMilliW != 250500 || d.PowerLimitMilliW != 700000 || snap.Driver != "550.1" || snap.Host.Used() != 60 {
		t.Errorf("snapshot = %+v", snap)
	}
	if p := snap.Processes[0]; p.PID != 42 || p.User != "ana" || p.UID != 1000 || p.Util != -1 || p.RunID != 0 || snap.Runs != nil {
		t.Errorf("holder = %+v, runs %+v: want the holder without the host's run ids", p, snap.Runs)
	}
	mu.Lock()
	if len(alerts) != 1 || alerts[0].Host != "gpu2" || alerts[0].Kind != gpu.AlertTemperature || !strings.HasPrefix(alerts[0].Key, "host:gpu2:") {
		t.Errorf("alerts = %+v, want one temperature alert of gpu2", alerts)
	}
	mu.Unlock()

	before := time.Now()
	writeAnswer(t, answer, "trainbot: something broke\n")
	hs = waitFor(t, s, "unreachable", func(hs gpu.HostSample) bool { return hs.Unreachable != nil })
	if !strings.Contains(hs.Unreachable.Error(), "something broke") || hs.Since.Before(before.Add(-time.Second)) || hs.Snapshot.At.IsZero() {
		t.Errorf("not a sample: %+v, want why, since when, and the last answer kept", hs)
	}
	since := hs.Since
	srv.Stop()
	hs = waitFor(t, s, "with the connection down", func(hs gpu.HostSample) bool {
		return hs.Unreachable != nil && !strings.Contains(hs.Unreachable.Error(), "something broke")
	})
	if !hs.Since.Equal(since) {
		t.Errorf("since %s, want still %s", hs.Since, since)
	}
	t.Logf("down: %v", hs.Unreachable)
}
