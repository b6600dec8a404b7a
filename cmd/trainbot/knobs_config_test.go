package main

import (
	"strings"
	"syscall"
	"testing"
)

// [jobs.signals], [jobs.live] and checkpoint become the job's fields;
// a bad signal name, or one that suits not its key, is told at its line.
func TestKnobsConvert(t *testing.T) {
	bc, err := convert(t, `[[jobs]]
name = "k"
command = ["python3", "train.py"]
checkpoint = "ckpt/*.pt"
[jobs.signals]
stop = "SIGTERM"
checkpoint = "usr1"
control = "SIGUSR2"
[jobs.live]
lr = { type = "float", min = 0, max = 1 }
`)
	if err != nil {
		t.Fatal(err)
	}
	j := bc.jobs[0]
	if j.Signals.Stop != syscall.SIGTERM || j.Signals.Checkpoint != syscall.SIGUSR1 || j.Signals.Control != syscall.SIGUSR2 {
		t.Errorf("signals: got %+v", j.Signals)
	}
	if j.Checkpoint != "ckpt/*.pt" || j.Live["lr"].Type != "float" || *j.Live["lr"].Max != 1 {
		t.Errorf("checkpoint %q live %+v", j.Checkpoint, j.Live)
	}

	_, err = convert(t, `[[jobs]]
name = "k"
command = ["python3", "train.py"]
[jobs.signals]
stop = "SIGTREM"
[jobs.live]
lr = { min = 0 }
`)
	text := errText(err)
	for _, want := range []string{
		`test.toml:5: jobs[0].signals.stop: "SIGTREM" is not a signal name`,
		`test.toml:7: jobs[0].live.lr.type: missing`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("errors lack %q:\n%s", want, text)
		}
	}
	_, err = convert(t, "[[jobs]]\nname = \"k\"\ncommand = [\"x\"]\n[jobs.signals]\ncheckpoint = \"SIGTERM\"\n[jobs.live]\nlr = { type = \"double\" }\n")
	text = errText(err)
	for _, want := range []string{
		`test.toml:5: jobs[0].signals.checkpoint: SIGTERM would stop or harm the run`,
		`test.toml:7: jobs[0].live.lr.type: "double" is not one of int, float, string, bool`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("errors lack %q:\n%s", want, text)
		}
	}
}
