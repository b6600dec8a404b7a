package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/trainbot/trainbot/trainer/logparse"
)

// runParse runs `trainbot parse ARGS` with input on stdin.
func runParse(t *testing.T, input string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), append([]string{"parse"}, args...), env{stdin: strings.NewReader(input), stdout: &out, stderr: &errb})
	return code, out.String(), errb.String()
}

const parseSample = `Epoch 1/2
469/469 [====] - 3s 6ms/step - loss: 0.2950 - accuracy: 0.9150
Epoch 2/2
469/469 [====] - 3s 6ms/step - loss: nan - accuracy: 0.9641
{"lr": 0.001}
`

func TestParseText(t *testing.T) {
	code, out, errOut := runParse(t, parseSample)
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	want := `line 2  step 469  epoch 1  loss = 0.295
line 2  step 469  epoch 1  accuracy = 0.915
line 4  step 938  epoch 2  loss = NaN
line 4  step 938  epoch 2  accuracy = 0.9641
line 5  step 938  epoch 2  lr = 0.001
-- 5 lines read, 5 points found
metrics: accuracy (2, last 0.9641), loss (2, last NaN), lr (1, last 0.001)
progress: step 938/938 · epoch 2/2
`
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}

func TestParseJSON(t *testing.T) {
	input := "step 7: loss=inf acc=-inf\n" + parseSample
	code, out, errOut := runParse(t, input, "--json")
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	want := `{"step":7,"name":"loss","value":"Inf"}
{"step":7,"name":"acc","value":"-Inf"}
{"step":469,"epoch":1,"name":"loss","value":0.295}
{"step":469,"epoch":1,"name":"accuracy","value":0.915}
{"step":938,"epoch":2,"name":"loss","value":"NaN"}
{"step":938,"epoch":2,"name":"accuracy","value":0.9641}
{"step":938,"epoch":2,"name":"lr","value":0.001}
`
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}

	// The JSON lines read back (as TRAINBOT_METRICS_FILE lines) as the same points.
	code, again, _ := runParse(t, out, "--json")
	if code != exitOK || again != want {
		t.Errorf("read back: exit %d, got\n%s\nwant\n%s", code, again, want)
	}
}

func TestParsePatternsAndFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "train.log")
	log := "train | 1200 updates | loss 2.31 | ppl 9.87\n"
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runParse(t, "", "--pattern", `(?P<step>\d+) updates`, "--json", path, "--pattern", `ppl (?P<ppl>\S+)`)
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	// ppl from the pattern; loss read as "key value" since the line has a step.
	want := `{"step":1200,"name":"ppl","value":9.87}` + "\n" + `{"step":1200,"name":"loss","value":2.31}` + "\n"
	if out != want {
		t.Errorf("got %q, want %q", out, want)
	}
}

func TestParseCarriageReturnsAndLongLines(t *testing.T) {
	// A tqdm bar in a pipe: thousands of redraws and no newline until the
	// end, longer than MaxLineLen in all; every redraw is read.
	var b strings.Builder
	for n := 1; n <= 2000; n++ {
		b.WriteString("\r")
		b.WriteString(strings.Repeat(" ", 30))
		b.WriteString(" 50%|█████     | ")
		b.WriteString(strconv.Itoa(n))
		b.WriteString("/2000 [00:01<00:01, 99.00it/s, loss=")
		b.WriteString(strconv.Itoa(n))
		b.WriteString("]")
	}
	b.WriteString("\n")
	b.WriteString("x" + strings.Repeat("y", 200<<10) + " loss=5\n") // cut: the rest of the line is not read
	b.WriteString("loss=6")                                         // no final newline
	code, out, _ := runParse(t, b.String())
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(out, "-- 3 lines read, 2001 points found\n") {
		t.Errorf("summary: got\n%s", lastLines(out, 3))
	}
	if !strings.Contains(out, "line 1  step 2000  loss = 2000\n") || !strings.Contains(out, "line 3  step 2000  loss = 6\n") {
		t.Errorf("points: got\n%s", lastLines(out, 6))
	}
}

func TestParseNothingFound(t *testing.T) {
	code, out, errOut := runParse(t, "hello\nworld\n")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	if want := "-- 2 lines read, 0 points found\nprogress: step 0\n"; out != want {
		t.Errorf("got %q, want %q", out, want)
	}
	if !strings.Contains(errOut, "no metrics in 2 lines of standard input") || !strings.Contains(errOut, "--pattern") {
		t.Errorf("stderr: got %q", errOut)
	}
}

func TestParseUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--pattern", `loss (\d+)`}, "named group"},
		{[]string{"--pattern", `(?P<loss>[`}, "error parsing regexp"},
		{[]string{"--bogus"}, "flag provided but not defined"},
		{[]string{"a.log", "b.log"}, `unexpected argument "b.log"`},
	} {
		code, _, errOut := runParse(t, "", tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "Usage: trainbot parse") {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", tc.args, code, errOut, exitUsage, tc.want)
		}
	}
	code, _, errOut := runParse(t, "", filepath.Join(t.TempDir(), "missing.log"))
	if code != exitFail || !strings.Contains(errOut, "missing.log") {
		t.Errorf("missing file: exit %d, stderr %q", code, errOut)
	}
	if code, out, _ := runParse(t, "", "-h"); code != exitOK || out != "" {
		t.Errorf("-h: exit %d, stdout %q", code, out)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestPointJSONAsEncoder holds the hand-written JSON of parse --json to the
// bytes encoding/json writes for the same point.
func TestPointJSONAsEncoder(t *testing.T) {
	values := []float64{0, 1, -1, 0.5, 1e-7, -2.5e-9, 1e20, 1e21, 123456789.125, 6.02e23, math.SmallestNonzeroFloat64,
		math.MaxFloat64, math.NaN(), math.Inf(1), math.Inf(-1), 0.1 + 0.2, 1e-6, 9.999999e-7}
	names := []string{"loss", "train/loss", `a"b`, `back\slash`, "a<b>&c", "验证损失", "x\u2028y", "tab\there"}
	var c nameCache
	for i, v := range values {
		for j, name := range names {
			pt := logparse.Point{Step: int64(i*1000 + j), Epoch: math.NaN(), Name: name, Value: v}
			if j%2 == 1 {
				pt.Epoch = values[(i+j)%len(values)]
				if math.IsNaN(pt.Epoch) || math.IsInf(pt.Epoch, 0) {
					pt.Epoch = 3
				}
			}
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(toPointJSON(pt)); err != nil {
				t.Fatal(err)
			}
			if got := appendPointJSON(nil, pt, &c); string(got) != want.String() {
				t.Errorf("%+v: got %s, want %s", pt, got, want.String())
			}
		}
	}
}
