package main

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/plots"
	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/logparse"
)

// writeHistory writes two finished runs with losses and memory samples into a
// new data directory.
func writeHistory(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	start := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for i, p := range []struct {
		ckpt string
		dur  time.Duration
		gpu  int64
	}{{"false", 50 * time.Minute, 40 << 30}, {"true", 62 * time.Minute, 17 << 30}} {
		r := &trainer.Run{Job: "bert", Params: map[string]string{"grad_ckpt": p.ckpt}, State: trainer.StateEnded,
			Outcome: trainer.OutcomeFinished, StartedAt: start, EndedAt: start.Add(p.dur), Steps: 3000}
		id, err := st.CreateRun(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		for k := range 300 {
			at := start.Add(p.dur * time.Duration(k+1) / 300)
			v := 2*math.Exp(-float64(k)/60) + 0.05*float64(i)
			st.AddPoints(id, []trainer.TimedPoint{{Point: logparse.Point{Step: int64(k+1) * 10, Epoch: math.NaN(), Name: "loss", Value: v}, At: at}})
		}
		var mem []history.RunMemory
		for k := range 60 {
			g, tot, h := p.gpu, int64(80<<30), int64(5<<30)
			mem = append(mem, history.RunMemory{RunID: id, T: start.Add(time.Duration(k) * time.Minute), GPUBytes: &g, GPUTotal: &tot, HostBytes: &h})
		}
		if err := st.AddRunMemory(ctx, mem); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func runCmd(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(context.Background(), args, env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb})
	return code, out.String(), errb.String()
}

func checkPNG(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if got := img.Bounds().Size(); got != (image.Point{plots.Width, plots.Height}) {
		t.Fatalf("%s: size %v", path, got)
	}
}

func TestPlotCommand(t *testing.T) {
	dir := writeHistory(t)
	out := t.TempDir()
	for _, c := range []struct {
		args []string
		file string
		want string
	}{
		{[]string{"plot", "1", "-o", "f.png"}, "f.png", "f.png (run #1 bert · loss · 300 points)"},
		{[]string{"plot", "#2", "--metric", "loss", "--x", "time", "-o", "t.png"}, "t.png", "t.png (run #2 bert · loss · 300 points)"},
		{[]string{"plot", "1", "--kind", "memory", "-o", "m.png"}, "m.png", "m.png (run #1 bert · memory · peak GPU 40.00 GiB of 80.00 GiB · peak host 5.00 GiB)"},
	} {
		args := append(c.args, "--data", dir)
		for i, a := range args {
			if strings.HasSuffix(a, ".png") {
				args[i] = filepath.Join(out, a)
			}
		}
		code, stdout, stderr := runCmd(args...)
		if code != exitOK {
			t.Fatalf("%v: exit %d: %s", c.args, code, stderr)
		}
		if got := strings.TrimSpace(stdout); got != filepath.Join(out, c.want) {
			t.Errorf("%v: stdout %q, want %q", c.args, got, filepath.Join(out, c.want))
		}
		checkPNG(t, filepath.Join(out, c.file))
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"plot", "9"}, exitFail, "run 9 not found in"},
		{[]string{"plot", "1", "--kind", "util"}, exitFail, "no GPU was sampled while run #1 ran"},
		{[]string{"plot", "1", "--kind", "pie"}, exitUsage, `--kind "pie": want loss, memory or util`},
		{[]string{"plot", "1", "--x", "epoch"}, exitUsage, `--x "epoch": want step or time`},
		{[]string{"plot", "1", "--kind", "memory", "--metric", "loss"}, exitUsage, "--metric goes with --kind loss"},
		{[]string{"plot", "x"}, exitUsage, `"x" is not a run id`},
	} {
		code, _, stderr := runCmd(append(c.args, "--data", dir)...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
}

func TestCompareCommand(t *testing.T) {
	dir := writeHistory(t)
	f := filepath.Join(t.TempDir(), "c.png")
	code, stdout, stderr := runCmd("compare", "1", "2", "--data", dir, "-o", f)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"对比 compare · loss · against run #1",
		"#2 bert · finished · grad_ckpt=true",
		"peak GPU 17.00 GiB (−57 %)",
		"#2 vs #1: peak GPU memory −57 %, time +24 %",
		f + " (loss of runs #1, #2)",
		strings.TrimSuffix(f, ".png") + "-memory.png (memory of runs #1, #2 · peaks #1 40.00 GiB, #2 17.00 GiB)",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	checkPNG(t, f)
	checkPNG(t, strings.TrimSuffix(f, ".png")+"-memory.png")
	// --metric memory: the memory overlay alone, over steps with --x step.
	m := filepath.Join(t.TempDir(), "m.png")
	code, stdout, stderr = runCmd("compare", "1", "2", "--metric", "memory", "--x", "step", "--data", dir, "-o", m)
	if code != exitOK || !strings.Contains(stdout, m+" (memory of runs #1, #2") || strings.Contains(stdout, "loss of runs") {
		t.Fatalf("--metric memory: exit %d\n%s%s", code, stdout, stderr)
	}
	checkPNG(t, m)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"compare", "1"}, exitUsage, "compare takes two or more run ids"},
		{[]string{"compare", "1", "7"}, exitFail, "run 7 not found in"},
		{[]string{"compare", "1", "2", "--metric", "bleu"}, exitFail, `none of the runs has a metric "bleu"`},
	} {
		code, _, stderr := runCmd(append(c.args, "--data", dir)...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
}

func TestFitCommand(t *testing.T) {
	dir := writeHistory(t) // two runs of bert without a batch parameter
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"fit"}, exitUsage, "fit takes one job name"},
		{[]string{"fit", "bert", "--limit", "lots"}, exitUsage, `--limit "lots": want bytes`},
		{[]string{"fit", "bert"}, exitFail, "no answer: the job has no batch parameter"},
		{[]string{"fit", "bert", "--param", "grad_ckpt", "--json"}, exitFail, "no answer: too few runs"},
	} {
		code, stdout, stderr := runCmd(append(c.args, "--data", dir)...)
		if code != c.code || !strings.Contains(stdout+stderr, c.want) {
			t.Errorf("%v: exit %d, stdout %q stderr %q; want %d and %q", c.args, code, stdout, stderr, c.code, c.want)
		}
	}
	if v, ok := parseSize("24GiB"); !ok || v != 24<<30 {
		t.Errorf("24GiB: %d %v", v, ok)
	}
	if v, ok := parseSize("800 MB"); !ok || v != 800e6 {
		t.Errorf("800 MB: %d %v", v, ok)
	}
	if v, ok := parseSize("1048576"); !ok || v != 1<<20 {
		t.Errorf("1048576: %d %v", v, ok)
	}
}
