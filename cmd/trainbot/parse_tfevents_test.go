package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseTFEvents(t *testing.T) {
	code, out, errOut := runParse(t, "", "--tfevents", "../../trainer/tfevents/testdata/pytorch")
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if want := "events.out.tfevents.1764547200.fixture.4242.0  step 0  2025-12-01T00:00:01Z  loss/train = 1"; lines[0] != want {
		t.Errorf("first line %q, want %q", lines[0], want)
	}
	for _, want := range []string{
		"-- 1 event files, 44 records with scalars, 44 points found",
		"metrics: accuracy/val (4, last 0.9750000238418579), loss/train (20, last 0.05000000074505806), lr (20, last 0.013508517295122147)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}

	// A damaged file: the corrupt record is skipped with a warning, the
	// torn one reported.
	code, out, errOut = runParse(t, "", "--json", "--tfevents", "../../trainer/tfevents/testdata/damaged/events.out.tfevents.1764547600.fixture.3.0")
	if code != exitOK || !strings.Contains(errOut, `why="bad data CRC"`) {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var steps []int64
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var p struct {
			Step  int64  `json:"step"`
			Name  string `json:"name"`
			Time  string `json:"time"`
			File  string `json:"file"`
			Value any    `json:"value"`
		}
		if err := json.Unmarshal([]byte(l), &p); err != nil || p.Name != "loss" || p.Time == "" || p.File == "" {
			t.Fatalf("line %q: %+v %v", l, p, err)
		}
		steps = append(steps, p.Step)
	}
	if len(steps) != 4 || steps[1] != 3 {
		t.Errorf("steps %v, want 1 3 4 5", steps)
	}

	if code, _, errOut := runParse(t, "", "--tfevents", t.TempDir()); code != exitFail || !strings.Contains(errOut, "no events.out.tfevents.* files") {
		t.Errorf("an empty dir: exit %d, %q", code, errOut)
	}
	if code, _, _ := runParse(t, "", "--tfevents", ".", "--pattern", "x (?P<x>\\d)"); code != exitUsage {
		t.Errorf("--tfevents with --pattern: exit %d, want %d", code, exitUsage)
	}
}
