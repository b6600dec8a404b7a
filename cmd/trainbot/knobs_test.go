package main

import (
	"context"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/plots"
)

// knobsScript saves ckpt/ckpt-N.pt on SIGUSR1, reads lr from
// $TRAINBOT_CONTROL_FILE on SIGUSR2, and prints its lr with every step (the
// README's snippets, reduced to plain Python).
const knobsScript = `
import json, os, signal, time
flags = {"save": False, "reload": False}
signal.signal(signal.SIGUSR1, lambda s, f: flags.__setitem__("save", True))
signal.signal(signal.SIGUSR2, lambda s, f: flags.__setitem__("reload", True))
lr, n = 0.1, 0
os.makedirs("ckpt", exist_ok=True)
print("ready", flush=True)
for step in range(1, 1000000):
    if flags["save"]:
        flags["save"] = False
        n += 1
        with open("ckpt/ckpt-%d.pt" % n, "w") as f:
            f.write("weights at step %d" % step)
    if flags["reload"]:
        flags["reload"] = False
        with open(os.environ["TRAINBOT_CONTROL_FILE"]) as f:
            lr = json.load(f)["values"].get("lr", lr)
    print("step %d loss=%.5f lr=%g" % (step, 1.0 / step, lr), flush=True)
    time.sleep(0.02)
`

// 存档 and 调参 in the console, on a real script: the reply names the new
// checkpoint file, the script's printed lr changes, and the loss chart
// (画图) has the change's marker.
func TestKnobsInTheConsole(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "train.py"), []byte(knobsScript), 0o644)
	cfg := filepath.Join(dir, "c.toml")
	os.WriteFile(cfg, []byte(`data_dir = "`+filepath.Join(dir, "data")+`"
[[jobs]]
name = "k"
command = ["python3", "train.py"]
dir = "`+dir+`"
checkpoint = "ckpt/*.pt"
[jobs.signals]
checkpoint = "SIGUSR1"
control = "SIGUSR2"
[jobs.live]
lr = { type = "float", min = 0, max = 1 }
`), 0o644)
	pr, pw := io.Pipe()
	e, out, errOut := testEnv(t, pr)
	done := make(chan int, 1)
	go func() { done <- run(context.Background(), []string{"console", "--config", cfg}, e) }()
	say := func(s string) {
		t.Helper()
		if _, err := io.WriteString(pw, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	// until asks cmd until its answer matches re (bounded).
	until := func(pos int, cmd, re string) (string, int) {
		t.Helper()
		rx := regexp.MustCompile(re)
		for i := 0; i < 100; i++ {
			say(cmd)
			_, p := waitFor(t, out, pos, `(?s).*\n`)
			time.Sleep(100 * time.Millisecond)
			s := out.String()[pos:]
			if loc := rx.FindStringIndex(s); loc != nil {
				return s[loc[0]:loc[1]], pos + loc[1]
			}
			pos = max(pos, p-1)
		}
		t.Fatalf("%s never answered %q:\n%s", cmd, re, out.String()[pos:])
		return "", 0
	}
	say("开始")
	_, pos := waitFor(t, out, 0, `run #1 started: k`)
	_, pos = until(pos, "日志 3", `step \d+ loss`)

	say("调参 lr=2")
	_, pos = waitFor(t, out, pos, `lr: "2" is above the maximum 1`)
	say("调参 momentum=0.9")
	_, pos = waitFor(t, out, pos, `momentum: "0.9" is not a live value of k; it declares lr`)

	sent := time.Now()
	say("存档")
	// The reply comes at once; the file is named in a second message.
	_, pos = waitFor(t, out, pos, `💾 Run #1 \(k\): SIGUSR1 sent\. I will say which file matching ckpt/\*\.pt appears`)
	saved, pos := waitFor(t, out, pos, `💾[^\n]*new checkpoint ckpt-1\.pt[^\n]*`)
	t.Logf("存档 → the message naming the file: %s (%s)", time.Since(sent).Round(time.Millisecond), saved)
	if _, err := os.Stat(filepath.Join(dir, "ckpt", "ckpt-1.pt")); err != nil {
		t.Fatal(err)
	}

	say("调参 lr=0.5")
	_, pos = waitFor(t, out, pos, `🎛[^\n]*lr=0\.5[^\n]*SIGUSR2`)
	_, pos = until(pos, "日志 2", `lr=0\.5\n`)

	say("画图 loss")
	img, pos := waitFor(t, out, pos, `\[image\] \S+loss\S*\.png`)
	f, err := os.Open(strings.TrimPrefix(img, "[image] "))
	if err != nil {
		t.Fatal(err)
	}
	pic, err := png.Decode(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	cols := 0
	b := pic.Bounds()
	for x := b.Min.X; x < b.Max.X; x++ {
		n := 0
		for y := b.Min.Y; y < b.Max.Y; y++ {
			r, g, bl, _ := pic.At(x, y).RGBA()
			if uint8(r>>8) == plots.MarkerColor.R && uint8(g>>8) == plots.MarkerColor.G && uint8(bl>>8) == plots.MarkerColor.B {
				n++
			}
		}
		if n > 100 {
			cols++
		}
	}
	if cols == 0 {
		t.Errorf("the loss chart %s has no marker of the change", img)
	}

	say("停止")
	waitFor(t, out, pos, `run #1 \(k\) (stopped|finished)`)
	pw.Close()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the console did not end at the end of its input")
	}
}
