package trainer_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/shimctl"
)

// knobScript is a training script with the three handlers the README
// documents: SIGUSR1 saves ckpt/ckpt-N.pt (written to a temporary name,
// then renamed, with its .done marker), SIGUSR2 reads lr from
// $TRAINBOT_CONTROL_FILE, and a stop signal is logged by name.
const knobScript = `
import json, os, signal, sys, time
flags = {"save": False, "reload": False}
signal.signal(signal.SIGUSR1, lambda s, f: flags.__setitem__("save", True))
signal.signal(signal.SIGUSR2, lambda s, f: flags.__setitem__("reload", True))
def stop(s, f):
    print("got signal " + signal.Signals(s).name, flush=True)
    sys.exit(0)
signal.signal(signal.SIGINT, stop)
signal.signal(signal.SIGTERM, stop)
lr, n = 0.1, 0
os.makedirs("ckpt", exist_ok=True)
print("ready", flush=True)
for step in range(1, 1000000):
    if flags["save"]:
        flags["save"] = False
        n += 1
        with open("ckpt/ckpt-%d.pt.tmp" % n, "w") as f:
            f.write("weights at step %d" % step)
        os.replace("ckpt/ckpt-%d.pt.tmp" % n, "ckpt/ckpt-%d.pt" % n)
        open("ckpt/ckpt-%d.pt.done" % n, "w").close()
    if flags["reload"]:
        flags["reload"] = False
        with open(os.environ["TRAINBOT_CONTROL_FILE"]) as f:
            lr = json.load(f)["values"].get("lr", lr)
    print("step %d loss=%.5f lr=%g" % (step, 1.0 / step, lr), flush=True)
    time.sleep(0.05)
`

func knobJob(t *testing.T, name string) *trainer.Job {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "train.py"), []byte(knobScript), 0o644); err != nil {
		t.Fatal(err)
	}
	j := job(name, []string{"python3", "-u", "train.py"})
	j.Dir, j.Checkpoint = dir, "ckpt/*.pt"
	j.Signals = trainer.Signals{Checkpoint: syscall.SIGUSR1, Control: syscall.SIGUSR2}
	lo, hi := 0.0, 1.0
	j.Live = map[string]trainer.ParamSpec{"lr": {Type: trainer.ParamFloat, Min: &lo, Max: &hi}}
	return j
}

// 存档 on a script that saves on SIGUSR1: the new file is found and named;
// 调参 lr=0.5 reaches the script through its control file on SIGUSR2, its
// printed lr changes (and is parsed), and the change is recorded.
func TestCheckpointAndSetReachARealScript(t *testing.T) {
	h := newHarness(t, knobJob(t, "k"))
	r := h.start("k", nil)
	h.waitTail(r.ID, "ready")

	ask, err := h.sup.Checkpoint(context.Background(), r.ID, "tester")
	if err != nil {
		t.Fatal(err)
	}
	res := ask.Wait(context.Background(), 20*time.Second)
	if filepath.Base(res.Path) != "ckpt-1.pt" || !res.Done {
		t.Fatalf("checkpoint: got %q (done %v, waited %s), want ckpt-1.pt with its marker", res.Path, res.Done, res.Waited)
	}
	t.Logf("存档: %s reported %s after the signal", filepath.Base(res.Path), res.Took)
	ask, err = h.sup.Checkpoint(context.Background(), r.ID, "tester")
	if err != nil {
		t.Fatal(err)
	}
	if res := ask.Wait(context.Background(), 20*time.Second); filepath.Base(res.Path) != "ckpt-2.pt" {
		t.Fatalf("second checkpoint: got %+v; want ckpt-2.pt", res)
	}

	// The control socket's "signal" never sends a signal that stops.
	if _, err := shimctl.Call(filepath.Dir(r.LogPath), shimctl.Request{Op: "signal", Signal: int(syscall.SIGTERM)}, 2*time.Second); err == nil || !strings.Contains(err.Error(), "may not be sent") {
		t.Fatalf("signal SIGTERM on the control socket: got %v, want a refusal", err)
	}

	if _, err := h.sup.SetLive(context.Background(), r.ID, map[string]string{"lr": "2"}, "tester"); !errors.Is(err, trainer.ErrBadParam) {
		t.Fatalf("lr=2 (max 1): got %v, want ErrBadParam", err)
	}
	if _, err := h.sup.SetLive(context.Background(), r.ID, map[string]string{"momentum": "0.9"}, "tester"); !errors.Is(err, trainer.ErrBadParam) {
		t.Fatalf("an undeclared value: got %v, want ErrBadParam", err)
	}
	ch, err := h.sup.SetLive(context.Background(), r.ID, map[string]string{"lr": "0.5"}, "tester")
	if err != nil {
		t.Fatal(err)
	}
	if ch.Version != 1 || ch.Label() != "lr=0.5" {
		t.Fatalf("change: got version %d label %q, want 1 and lr=0.5", ch.Version, ch.Label())
	}
	h.waitTail(r.ID, "lr=0.5")
	// The parsed lr reaches the store too.
	deadline := time.Now().Add(20 * time.Second)
	for {
		h.st.Flush(context.Background())
		pts, err := h.st.Series(context.Background(), r.ID, "lr")
		if err != nil {
			t.Fatal(err)
		}
		if len(pts) > 0 && pts[len(pts)-1].Value == 0.5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the parsed lr never became 0.5 (%d points)", len(pts))
		}
		time.Sleep(50 * time.Millisecond)
	}
	changes, err := h.st.RunChanges(context.Background(), r.ID)
	if err != nil || len(changes) != 1 || changes[0].Label() != "lr=0.5" || changes[0].By != "tester" {
		t.Fatalf("recorded changes: got %+v, %v; want one lr=0.5 by tester", changes, err)
	}
	h.sup.Stop(r.ID, "tester")
	h.wait(r.ID)
}

// A job whose signals.stop is SIGTERM gets SIGTERM first, not SIGINT.
func TestStopSignalIsTheJobs(t *testing.T) {
	j := knobJob(t, "s")
	j.Signals.Stop = syscall.SIGTERM
	h := newHarness(t, j)
	r := h.start("s", nil)
	h.waitTail(r.ID, "ready")
	h.sup.Stop(r.ID, "tester")
	got := h.wait(r.ID)
	log, _ := os.ReadFile(got.LogPath)
	if !strings.Contains(string(log), "got signal SIGTERM") || strings.Contains(string(log), "got signal SIGINT") {
		t.Fatalf("the script's log does not say it got SIGTERM first:\n%s", tail(string(log), 5))
	}
	if got.Outcome != trainer.OutcomeStopped {
		t.Errorf("outcome %s (%s), want stopped", got.Outcome, got.Detail)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Without signals.checkpoint, 存档 says which key is missing.
func TestCheckpointWithoutSignalSaysSo(t *testing.T) {
	j := knobJob(t, "n")
	j.Signals.Checkpoint = 0
	h := newHarness(t, j)
	r := h.start("n", nil)
	h.waitTail(r.ID, "ready")
	_, err := h.sup.Checkpoint(context.Background(), r.ID, "tester")
	var ke *trainer.KnobError
	if !errors.As(err, &ke) || ke.Why != trainer.KnobNoSignal {
		t.Fatalf("got %v, want a KnobError %s", err, trainer.KnobNoSignal)
	}
	h.sup.Stop(r.ID, "tester")
	h.wait(r.ID)
}

func TestNewestCheckpoint(t *testing.T) {
	now := time.Now()
	dir := t.TempDir()
	write := func(name string, age time.Duration) {
		t.Helper()
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	write("ckpt/ckpt-20.pt", time.Hour)
	write("ckpt/ckpt-40.pt", time.Minute)
	write("ckpt/ckpt-60.pt", time.Second)      // still being written, as far as anyone can tell
	write("ckpt/ckpt-80.pt.tmp", 0)            // never a checkpoint
	write("ckpt/ckpt-60.pt.done", time.Second) // …unless its marker says it is complete
	for _, tc := range []struct {
		name, pattern string
		settle        time.Duration
		want          string
	}{
		{"marker", "ckpt/*.pt", trainer.CheckpointSettle, "ckpt-60.pt"},
		{"directory", "ckpt", trainer.CheckpointSettle, "ckpt-60.pt"},
		{"absolute", filepath.Join(dir, "ckpt", "ckpt-[24]0.pt"), trainer.CheckpointSettle, "ckpt-40.pt"},
		{"settle", "ckpt/ckpt-[24]0.pt", 2 * time.Minute, "ckpt-20.pt"},
		{"none", "ckpt/*.bin", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _, err := trainer.NewestCheckpoint(dir, tc.pattern, tc.settle, now)
			if tc.want == "" {
				if !errors.Is(err, trainer.ErrNoCheckpoint) {
					t.Fatalf("got %q, %v; want ErrNoCheckpoint", p, err)
				}
				return
			}
			if err != nil || filepath.Base(p) != tc.want {
				t.Fatalf("got %q, %v; want %s", p, err, tc.want)
			}
		})
	}
	os.Remove(filepath.Join(dir, "ckpt", "ckpt-60.pt.done"))
	if p, _, _ := trainer.NewestCheckpoint(dir, "ckpt/*.pt", trainer.CheckpointSettle, now); filepath.Base(p) != "ckpt-40.pt" {
		t.Fatalf("without its marker a file 1s old is not complete: got %q, want ckpt-40.pt", p)
	}
}

func TestSignalsAndLiveAreChecked(t *testing.T) {
	j := &trainer.Job{Name: "j", Command: []string{"true"},
		Signals: trainer.Signals{Stop: syscall.SIGKILL, Checkpoint: syscall.SIGTERM},
		Live:    map[string]trainer.ParamSpec{"lr": {Type: "double"}}}
	err := j.Normalize()
	for _, key := range []string{"signals.stop", "signals.checkpoint", "live.lr.type"} {
		var found bool
		for _, e := range unjoin(err) {
			var ke *trainer.KeyError
			if errors.As(e, &ke) && ke.Key == key {
				found = true
			}
		}
		if !found {
			t.Errorf("no error at %s in %v", key, err)
		}
	}
	if sig, ok := trainer.ParseSignal("usr1"); !ok || sig != syscall.SIGUSR1 {
		t.Errorf("ParseSignal(usr1): got %v %v", sig, ok)
	}
	if _, ok := trainer.ParseSignal("SIGNOPE"); ok {
		t.Error("ParseSignal(SIGNOPE) took it")
	}
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unjoin(e)...)
		}
		return out
	}
	return []error{err}
}
