package demo

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/trainer/logparse"
)

func TestTrainingLearns(t *testing.T) {
	c := DefaultConfig()
	c.Steps, c.Pace = 600, 0
	var out bytes.Buffer
	res, err := Train(context.Background(), c, &out)
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps != 600 || res.Interrupted {
		t.Fatalf("got %+v", res)
	}
	if !(res.FinalLoss < res.FirstLoss/2) {
		t.Fatalf("final loss %.4f is not below half the first %.4f", res.FinalLoss, res.FirstLoss)
	}
	if res.ValAcc < 0.8 {
		t.Errorf("validation accuracy %.3f, want at least 0.8", res.ValAcc)
	}
	// The output goes through the same parser as a user's script.
	p := &logparse.Parser{}
	var first, last float64 = math.NaN(), math.NaN()
	for _, line := range strings.Split(out.String(), "\n") {
		for _, pt := range p.Line(line) {
			if pt.Name == "loss" {
				if math.IsNaN(first) {
					first = pt.Value
				}
				last = pt.Value
			}
		}
	}
	pr := p.Progress()
	if pr.Step != 600 || pr.TotalSteps != 600 || pr.TotalEpochs != 6 {
		t.Errorf("parsed progress %+v, want step 600/600 in 6 epochs", pr)
	}
	if !(last < first/2) {
		t.Errorf("parsed losses %g -> %g", first, last)
	}
	if !strings.Contains(out.String(), "Epoch [1/6], Step [10/100], Loss: ") {
		t.Errorf("no classic line in:\n%s", out.String()[:200])
	}
}

func TestInterruptStopsAndCheckpoints(t *testing.T) {
	c := DefaultConfig()
	c.Pace = time.Millisecond
	c.Checkpoint = t.TempDir() + "/ckpt.json"
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	var out bytes.Buffer
	res, err := Train(ctx, c, &out)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Interrupted || res.Steps >= c.Steps {
		t.Fatalf("got %+v, want interrupted early", res)
	}
	if !strings.Contains(out.String(), "Checkpoint saved to") {
		t.Error("no checkpoint line")
	}
}

func TestEpochs(t *testing.T) {
	for steps, want := range map[int][2]int{1500: {15, 100}, 300: {3, 100}, 40: {1, 40}, 1: {1, 1}, 0: {1, 1}} {
		e, p := Epochs(steps)
		if e != want[0] || p != want[1] {
			t.Errorf("Epochs(%d) = %d, %d, want %v", steps, e, p, want)
		}
	}
}

func TestBadConfig(t *testing.T) {
	c := DefaultConfig()
	c.LR = 0
	if _, err := Train(context.Background(), c, &bytes.Buffer{}); err == nil {
		t.Fatal("a zero learning rate was accepted")
	}
}
