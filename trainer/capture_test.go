package trainer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// The parse queue's bound holds for what the queued lines cost in memory,
// not only for their text: a flood of one-character lines ("1\n" printed
// 50 million times) used to queue 64 Mi lines, about 2 GB.
func TestLineQueueBoundCountsEachLine(t *testing.T) {
	const max = 1 << 20
	q := newLineQueue(max)
	n := 0
	for n <= max && q.push(outLine{text: "1"}) {
		n++
	}
	if cost := n * (int(unsafe.Sizeof(outLine{})) + 1); cost > max {
		t.Fatalf("queued %d one-byte lines, at least %d bytes, over the bound of %d", n, cost, max)
	}
	if n == 0 {
		t.Fatal("queued no line")
	}
}

// The time of the last output is read on the monotonic clock, like the
// times it is compared with, so that a step of the wall clock (NTP, a VM
// resumed) neither raises a false stall alert nor hides a real stall.
func TestLastOutputIsMonotonic(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "output.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := newCapture(f, 0, 10)
	c.read(strings.NewReader("step 1 loss=0.5\n"), false)
	c.done()
	got := c.lastOutput()
	if got == got.Round(0) {
		t.Fatalf("last output %v has no monotonic clock reading", got)
	}
	if d := time.Since(got); d < 0 || d > time.Minute {
		t.Fatalf("last output %v ago", d)
	}
}

func TestShowsNaN(t *testing.T) {
	cases := []struct {
		line, name string
		want       bool
	}{
		{"epoch 0:  46%|####  | 46/100 [00:05<00:06, 8.9it/s, v_num=0, train_loss=nan, val_loss=0.523]", "train_loss", true},
		{`{"step": 5, "loss": nan}`, "loss", true},
		{"loss: -inf", "loss", true},
		{"loss = +inf", "loss", true},
		{" 30%|###       | 3/10 [00:00<00:00, 10.00it/s]", "eval_loss", false},
		{"val_train_loss=nan train_loss=0.5", "train_loss", false},
		{"train_loss=0.5 (was nan)", "train_loss", false},
		{"train_loss_ema=nan", "train_loss", false},
	}
	for _, c := range cases {
		if got := showsNaN(c.line, c.name); got != c.want {
			t.Errorf("showsNaN(%q, %q) = %v, want %v", c.line, c.name, got, c.want)
		}
	}
}
