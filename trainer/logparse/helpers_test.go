package logparse

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// pointString renders a point as "STEP EPOCH NAME=VALUE", EPOCH "-" when
// unknown: "1200 2 loss=0.0911", "300 - loss=NaN".
func pointString(p Point) string {
	epoch := "-"
	if p.HasEpoch() {
		epoch = num(p.Epoch)
	}
	return strconv.FormatInt(p.Step, 10) + " " + epoch + " " + p.Name + "=" + num(p.Value)
}

func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// progressString renders progress as "step 1200/1200 epoch 2/2"; unknown
// parts are "?".
func progressString(pr Progress) string {
	q := func(n int64) string {
		if n == 0 {
			return "?"
		}
		return strconv.FormatInt(n, 10)
	}
	epoch := "?"
	if !math.IsNaN(pr.Epoch) {
		epoch = num(pr.Epoch)
	}
	return "step " + strconv.FormatInt(pr.Step, 10) + "/" + q(pr.TotalSteps) + " epoch " + epoch + "/" + q(pr.TotalEpochs)
}

// parseLines feeds each line to p and renders the points.
func parseLines(p *Parser, lines []string) []string {
	var got []string
	for _, l := range lines {
		for _, pt := range p.Line(l) {
			got = append(got, pointString(pt))
		}
	}
	return got
}

// segments splits text the way trainbot's capture does: at '\n' and '\r'.
func segments(text string) []string {
	return strings.FieldsFunc(text, func(r rune) bool { return r == '\n' || r == '\r' })
}

func readTestdata(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func newParser(t testing.TB, patterns ...string) *Parser {
	t.Helper()
	p, err := New(patterns)
	if err != nil {
		t.Fatalf("New(%q): %v", patterns, err)
	}
	return p
}

func diffLines(t *testing.T, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") == strings.Join(want, "\n") {
		return
	}
	n := max(len(got), len(want))
	for i := 0; i < n; i++ {
		g, w := "(none)", "(none)"
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Errorf("point %d: got %q, want %q", i, g, w)
		}
	}
	t.Logf("all points:\n%s", strings.Join(got, "\n"))
}
