package plots

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"codeberg.org/go-fonts/liberation/liberationsansregular"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/internal/units"
	"golang.org/x/image/font/sfnt"
	"gonum.org/v1/plot"
)

var update = flag.Bool("update", false, "rewrite the golden images in testdata/")

// wqyZenHei is the CJK font of the CJK golden image (Debian fonts-wqy-zenhei,
// which .ci/run installs).
const wqyZenHei = "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc"

// rng is a small deterministic generator (splitmix64), so that test data
// never depends on math/rand's algorithms.
type rng uint64

func (r *rng) next() uint64 {
	*r += 0x9e3779b97f4a7c15
	z := uint64(*r)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// norm is a standard normal value (Box–Muller).
func (r *rng) norm() float64 {
	u1 := (float64(r.next()>>11) + 0.5) / (1 << 53)
	u2 := float64(r.next()>>11) / (1 << 53)
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}

// noisyLoss is a decaying loss with noise, n points at steps 0..n-1.
func noisyLoss(n int, seed uint64, noise float64) []XY {
	r := rng(seed)
	pts := make([]XY, n)
	for i := range pts {
		x := float64(i) / float64(max(n, 1))
		pts[i] = XY{float64(i), 2.2*math.Exp(-5*x) + 0.15 + noise*r.norm()*(0.3+math.Exp(-3*x))}
	}
	return pts
}

func painter(t testing.TB, font string) *Painter {
	t.Helper()
	p, err := New(Options{Font: font})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// decode checks that b is a PNG of the promised size.
func decode(t testing.TB, b []byte) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if got := img.Bounds().Size(); got != (image.Point{Width, Height}) {
		t.Fatalf("size %v, want %dx%d", got, Width, Height)
	}
	return img
}

// golden compares a chart with testdata/name, allowing small differences
// from font rasterisation: a pixel differs when a channel is off by more
// than 64, and at most 0.15% of the pixels may differ. With -update it
// rewrites the file.
func golden(t *testing.T, name string, b []byte) {
	t.Helper()
	got := decode(t, b)
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./plots -update to create it)", err)
	}
	want := decode(t, data)
	g, ok1 := got.(*image.RGBA)
	w, ok2 := want.(*image.RGBA)
	if !ok1 || !ok2 {
		t.Fatalf("decoded %T and %T, want *image.RGBA", got, want)
	}
	differ := 0
	for i := 0; i+3 < len(g.Pix) && i+3 < len(w.Pix); i += 4 {
		d := max(absDiff(g.Pix[i], w.Pix[i]), absDiff(g.Pix[i+1], w.Pix[i+1]), absDiff(g.Pix[i+2], w.Pix[i+2]))
		if d > 64 {
			differ++
		}
	}
	if limit := Width * Height * 15 / 10000; differ > limit {
		bad := filepath.Join(t.TempDir(), name)
		os.WriteFile(bad, b, 0o644)
		t.Errorf("%s: %d pixels differ from the golden image (limit %d); got %s (go test ./plots -update rewrites it)", name, differ, limit, bad)
	}
}

func absDiff(a, b uint8) uint8 {
	if a > b {
		return a - b
	}
	return b - a
}

func TestGolden(t *testing.T) {
	en := painter(t, FontNone)
	withNaN := noisyLoss(2000, 1, 0.08)
	for _, i := range []int{400, 401, 402, 1500} {
		withNaN[i].Y = math.NaN()
	}
	withNaN[1700].Y = math.Inf(1)
	val := noisyLoss(40, 2, 0.04)
	for i := range val {
		val[i].X *= 50
		val[i].Y += 0.1
	}
	var gpu, total, host []XY
	for i := range 720 {
		x := float64(i * 5)
		g := 2e9 + 12e9*(1-math.Exp(-x/300)) + 1.5e9*math.Sin(x/90)
		gpu = append(gpu, XY{x, g})
		total = append(total, XY{x, 80 << 30})
		host = append(host, XY{x, 3.1e9 + 4e7*float64(i%60)})
	}
	var util0, temp0, util1, temp1 []XY
	r := rng(3)
	for i := range 720 {
		x := float64(i * 5)
		util0 = append(util0, XY{x, math.Min(100, 85+10*r.norm())})
		temp0 = append(temp0, XY{x, 45 + 30*(1-math.Exp(-x/600))})
		util1 = append(util1, XY{x, math.Max(0, 40+15*r.norm())})
		temp1 = append(temp1, XY{x, 40 + 20*(1-math.Exp(-x/900))})
	}
	cases := []struct {
		name string
		draw func() ([]byte, error)
	}{
		{"loss.png", func() ([]byte, error) {
			return en.Loss(LossChart{Title: "demo · run #12 · finished", Smoothing: 0.6,
				Series: []Series{{Name: "loss", Points: withNaN}, {Name: "val_loss", Points: val}}})
		}},
		{"loss-million.png", func() ([]byte, error) {
			return en.Loss(LossChart{Title: "big · run #7 · running", Smoothing: 0.6,
				Series: []Series{{Name: "loss", Points: noisyLoss(1_000_000, 4, 0.05)}}})
		}},
		{"loss-log-time.png", func() ([]byte, error) {
			pts := noisyLoss(500, 5, 0.01)
			for i := range pts {
				pts[i].Y = math.Pow(10, 1-4*pts[i].X/500) * (1 + 0.3*math.Abs(math.Sin(pts[i].X)))
				pts[i].X *= 7.3 // seconds
			}
			return en.Loss(LossChart{Title: "lm · run #3 · stopped", XTime: true, Smoothing: 0.6, Series: []Series{{Name: "loss", Points: pts}}})
		}},
		{"loss-one-point.png", func() ([]byte, error) {
			return en.Loss(LossChart{Title: "demo · run #4 · failed", Smoothing: 0.6, Series: []Series{{Name: "loss", Points: []XY{{10, 0.7}}}}})
		}},
		{"memory.png", func() ([]byte, error) {
			return en.Memory(MemoryChart{Title: "bert · run #21 · finished", GPU: gpu, GPUTotal: total, Host: host})
		}},
		{"memory-cpu.png", func() ([]byte, error) {
			return en.Memory(MemoryChart{Title: "demo · run #2 · finished", Host: host})
		}},
		{"device.png", func() ([]byte, error) {
			return en.Device(DeviceChart{Title: "bert · run #21 · finished", Devices: []DeviceSeries{
				{Name: "GPU 0 · NVIDIA H100", Util: util0, TempC: temp0},
				{Name: "GPU 1 · NVIDIA H100", Util: util1, TempC: temp1},
			}})
		}},
		{"compare.png", func() ([]byte, error) {
			a, b := noisyLoss(3000, 6, 0.05), noisyLoss(3000, 7, 0.05)
			for i := range b {
				b[i].Y *= 1.1
			}
			return en.Loss(LossChart{KindZH: "对比", KindEN: "Comparison", Title: "loss · runs #12 vs #13", Smoothing: 0.6,
				Series: []Series{{Name: "#12 grad_ckpt=false", Points: a}, {Name: "#13 grad_ckpt=true", Points: b}}})
		}},
		{"loss-no-cjk-font.png", func() ([]byte, error) {
			return en.Loss(LossChart{Title: "图像分类 · run #5 · finished", Smoothing: 0.6,
				Series: []Series{{Name: "训练损失", Points: noisyLoss(300, 8, 0.05)}, {Name: "验证损失", Points: val}}})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := c.draw()
			if err != nil {
				t.Fatal(err)
			}
			golden(t, c.name, b)
		})
	}
	t.Run("loss-cjk.png", func(t *testing.T) {
		if _, err := os.Stat(wqyZenHei); err != nil {
			t.Skipf("no %s (apt install fonts-wqy-zenhei): %v", wqyZenHei, err)
		}
		zh := painter(t, wqyZenHei)
		b, err := zh.Loss(LossChart{Title: "图像分类 · run #5 · finished", Smoothing: 0.6,
			Series: []Series{{Name: "训练损失", Points: noisyLoss(300, 8, 0.05)}, {Name: "验证损失", Points: val}}})
		if err != nil {
			t.Fatal(err)
		}
		golden(t, "loss-cjk.png", b)
	})
}

func TestNoData(t *testing.T) {
	p := painter(t, FontNone)
	nan := []XY{{1, math.NaN()}, {2, math.Inf(1)}, {3, math.Inf(-1)}}
	for name, draw := range map[string]func() ([]byte, error){
		"no series":    func() ([]byte, error) { return p.Loss(LossChart{Smoothing: 0.6}) },
		"empty series": func() ([]byte, error) { return p.Loss(LossChart{Series: []Series{{Name: "loss"}}}) },
		"all NaN": func() ([]byte, error) {
			return p.Loss(LossChart{Smoothing: 0.6, Series: []Series{{Name: "loss", Points: nan}}})
		},
		"NaN X": func() ([]byte, error) {
			return p.Loss(LossChart{Series: []Series{{Name: "loss", Points: []XY{{math.NaN(), 1}}}}})
		},
		"no memory":     func() ([]byte, error) { return p.Memory(MemoryChart{}) },
		"total only":    func() ([]byte, error) { return p.Memory(MemoryChart{GPUTotal: []XY{{0, 1 << 30}}}) },
		"no device":     func() ([]byte, error) { return p.Device(DeviceChart{}) },
		"empty devices": func() ([]byte, error) { return p.Device(DeviceChart{Devices: []DeviceSeries{{Name: "GPU 0"}}}) },
	} {
		t.Run(name, func(t *testing.T) {
			b, err := draw()
			if !errors.Is(err, ErrNoData) {
				t.Fatalf("got %d bytes, err %v; want ErrNoData", len(b), err)
			}
		})
	}
}

// TestSmallAndOdd draws series that are short, flat, unsorted, constant in
// X, or mixed with NaN: each gives a PNG of the promised size. (Under
// -race a chart costs about a second of CPU, so the series that need no
// axis of their own share one chart.)
func TestSmallAndOdd(t *testing.T) {
	p := painter(t, FontNone)
	cases := []struct {
		name  string
		xTime bool
		s     []Series
	}{
		{"one point", false, []Series{{Name: "loss", Points: []XY{{5, 0.3}}}}},
		{"same step", true, []Series{{Name: "loss", Points: []XY{{3, 1}, {3, 2}, {3, 0.5}}}}},
		{"flat", false, []Series{{Name: "loss", Points: []XY{{0, 1}, {1, 1}, {2, 1}}}}},
		{"huge", true, []Series{{Name: "loss", Points: []XY{{0, 1e300}, {1, 1e301}}}}},
		{"tiny", false, []Series{{Name: "loss", Points: []XY{{0, 1e-12}, {1, 2e-12}, {2, 1.5e-12}}}}},
		{"zero and growth", false, []Series{{Name: "loss", Points: []XY{{0, 0}, {1, 1000}, {2, 1e6}}}}},
		{"mixed", false, []Series{
			{Name: "two points", Points: []XY{{0, 1}, {1, 0.5}}},
			{Name: "unsorted", Points: []XY{{3, 1}, {1, 2}, {2, 0.5}, {0, 3}}},
			{Name: "NaN first", Points: []XY{{0, math.NaN()}, {1, 1}, {2, 0.9}}},
			{Name: "negative", Points: []XY{{0, -1}, {1, -2}, {2, -2.5}}},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := p.Loss(LossChart{Title: c.name, XTime: c.xTime, Smoothing: 0.6, Series: c.s})
			if err != nil {
				t.Fatal(err)
			}
			decode(t, b)
		})
	}
	b, err := p.Memory(MemoryChart{Title: "one sample", GPU: []XY{{0, 1 << 30}}, Host: []XY{{0, 1 << 29}}})
	if err != nil {
		t.Fatal(err)
	}
	decode(t, b)
}

func TestDownsampleKeepsMinMaxPerColumn(t *testing.T) {
	for _, n := range []int{1, 100, 2561, 10_000, 333_333} {
		pts := noisyLoss(n, uint64(n), 0.2)
		// A few spikes that must survive.
		if n > 100 {
			pts[n/3].Y, pts[n/2].Y = 50, -50
		}
		const cols = 1280
		out := Downsample(pts, cols)
		if n <= 2*cols {
			if len(out) != n {
				t.Fatalf("n=%d: %d points, want them unchanged", n, len(out))
			}
			continue
		}
		if len(out) > 4*cols {
			t.Errorf("n=%d: %d points, want at most %d", n, len(out), 4*cols)
		}
		if out[0] != pts[0] || out[len(out)-1] != pts[n-1] {
			t.Errorf("n=%d: first/last not kept", n)
		}
		x0, x1 := pts[0].X, pts[n-1].X
		bucket := func(x float64) int { return min(int((x-x0)*cols/(x1-x0)), cols-1) }
		type mm struct{ lo, hi float64 }
		envelope := func(s []XY) map[int]mm {
			m := map[int]mm{}
			for _, p := range s {
				b := bucket(p.X)
				e, ok := m[b]
				if !ok {
					e = mm{p.Y, p.Y}
				}
				m[b] = mm{math.Min(e.lo, p.Y), math.Max(e.hi, p.Y)}
			}
			return m
		}
		want, got := envelope(pts), envelope(out)
		if len(got) != len(want) {
			t.Fatalf("n=%d: %d columns, want %d", n, len(got), len(want))
		}
		for b, w := range want {
			if got[b] != w {
				t.Fatalf("n=%d column %d: min/max %v, want %v", n, b, got[b], w)
			}
		}
		for i := 1; i < len(out); i++ {
			if out[i].X < out[i-1].X {
				t.Fatalf("n=%d: out of X order at %d", n, i)
			}
		}
	}
}

func TestEMA(t *testing.T) {
	pts := []XY{{0, 1}, {1, math.NaN()}, {2, 3}, {3, 3}}
	got := EMA(pts, 0.6)
	// TensorBoard: last = last*w + (1-w)*v; value = last / (1 - w^k).
	want := []XY{{0, 1}, {2, (0.6*0.4*1 + 0.4*3) / (1 - 0.36)}, {3, (0.36*0.4*1 + 0.6*0.4*3 + 0.4*3) / (1 - 0.216)}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i].X != want[i].X || math.Abs(got[i].Y-want[i].Y) > 1e-12 {
			t.Errorf("point %d: got %v, want %v", i, got[i], want[i])
		}
	}
}

func TestTicks(t *testing.T) {
	labels := func(ts []plot.Tick) string {
		var out []string
		for _, t := range ts {
			if t.Label != "" {
				out = append(out, t.Label)
			}
		}
		return strings.Join(out, " ")
	}
	cases := []struct {
		name string
		got  string
		want string
	}{
		{"steps", labels(numberTicks{want: 8}.Ticks(0, 12000)), "0 2k 4k 6k 8k 10k 12k"},
		{"half k", labels(numberTicks{want: 8}.Ticks(10000, 13000)), "10k 10.5k 11k 11.5k 12k 12.5k 13k"},
		{"million", labels(numberTicks{want: 8}.Ticks(0, 1e6)), "0 200k 400k 600k 800k 1M"},
		{"loss", labels(numberTicks{want: 6}.Ticks(0.04, 2.3)), "0.5 1 1.5 2"},
		{"fine", labels(numberTicks{want: 6}.Ticks(1.2300, 1.2304)), "1.23 1.2301 1.2302 1.2303 1.2304"},
		{"bytes", labels(byteTicks{want: 6}.Ticks(0, 80<<30)), "0 GiB 20 GiB 40 GiB 60 GiB 80 GiB"},
		{"bytes fine", labels(byteTicks{want: 6}.Ticks(14<<30, 15<<30)), "14 GiB 14.2 GiB 14.4 GiB 14.6 GiB 14.8 GiB 15 GiB"},
		{"duration", labels(durationTicks{want: 8}.Ticks(0, 3600)), "0s 10m 20m 30m 40m 50m 1h"},
		{"duration long", labels(durationTicks{want: 8}.Ticks(0, 30*3600)), "0s 6h 12h 18h 1d 1d6h"},
		{"seconds", labels(durationTicks{want: 8}.Ticks(0, 4)), "0s 0.5s 1s 1.5s 2s 2.5s 3s 3.5s 4s"},
		{"log", labels(logTicks{}.Ticks(-2, math.Log10(3))), "0.01 0.02 0.05 0.1 0.2 0.5 1 2"},
		{"log wide", labels(logTicks{}.Ticks(-4, 1)), "0.0001 0.001 0.01 0.1 1 10"},
		{"log narrow", labels(logTicks{}.Ticks(math.Log10(0.3), math.Log10(0.9))), "0.3 0.4 0.5 0.6 0.7 0.8 0.9"},
		{"step", labels(numberTicks{want: 8, integer: true}.Ticks(9, 11)), "9 10 11"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, c.got, c.want)
		}
	}
	// Degenerate ranges never loop long nor panic.
	for _, r := range [][2]float64{{1, 1}, {0, 1e300}, {-1e300, 1e300}, {5, 4}} {
		numberTicks{want: 8}.Ticks(r[0], r[1])
		durationTicks{want: 8}.Ticks(r[0], r[1])
		byteTicks{want: 6}.Ticks(r[0], r[1])
		logTicks{}.Ticks(r[0], r[1])
	}
}

func TestFonts(t *testing.T) {
	t.Run("none", func(t *testing.T) {
		p := painter(t, FontNone)
		if path, _ := p.CJK(); path != "" {
			t.Fatalf("CJK font %s with %q", path, FontNone)
		}
		for in, want := range map[string]string{
			"验证损失":            "val loss",
			"loss (训练)":       "loss (train)",
			"图像分类 · run #5":   "? · run #5",
			"val_loss":        "val_loss",
			"学习率=3e-4 批大小=32": "lr=3e-4 batch size=32",
		} {
			if got := p.Label(in); got != want {
				t.Errorf("Label(%q) = %q, want %q", in, got, want)
			}
		}
		if got := p.bilingual("损失", "Loss"); got != "Loss" {
			t.Errorf("bilingual = %q, want Loss", got)
		}
		// Without a Chinese font, a chart for a Chinese chat is in English.
		for _, l := range i18n.Langs {
			if got := p.kind(l, i18n.KindLoss); got != "Loss" {
				t.Errorf("kind %v = %q, want Loss", l, got)
			}
			if got := p.say(l, i18n.AxisStep); got != "step" {
				t.Errorf("say %v = %q, want step", l, got)
			}
		}
	})
	t.Run("cjk", func(t *testing.T) {
		if _, err := os.Stat(wqyZenHei); err != nil {
			t.Skipf("no %s (apt install fonts-wqy-zenhei): %v", wqyZenHei, err)
		}
		p := painter(t, wqyZenHei)
		if path, name := p.CJK(); path != wqyZenHei || name == "" {
			t.Fatalf("CJK() = %q, %q", path, name)
		}
		if got := p.Label("验证损失"); got != "验证损失" {
			t.Errorf("Label = %q, want it unchanged", got)
		}
		if got := p.bilingual("损失", "Loss"); got != "损失 Loss" {
			t.Errorf("bilingual = %q", got)
		}
		for _, c := range []struct {
			l               i18n.Lang
			kind, util, say string
		}{
			{i18n.ZhEn, "损失 Loss", "显卡 GPU utilisation", "time since start"},
			{i18n.Zh, "损失", "显卡利用率", "开始后的时间"},
			{i18n.En, "Loss", "GPU utilisation", "time since start"},
		} {
			if got := p.kind(c.l, i18n.KindLoss); got != c.kind {
				t.Errorf("kind %v = %q, want %q", c.l, got, c.kind)
			}
			if got := p.kind(c.l, i18n.KindUtil); got != c.util {
				t.Errorf("util kind %v = %q, want %q", c.l, got, c.util)
			}
			if got := p.say(c.l, i18n.AxisSinceStart); got != c.say {
				t.Errorf("say %v = %q, want %q", c.l, got, c.say)
			}
		}
		// A chart in each language draws, and the Chinese one differs.
		chart := LossChart{Title: "demo · run #1", Smoothing: 0.6, Series: []Series{{Name: "loss", Points: []XY{{0, 1}, {1, 0.5}, {2, 0.4}}}}}
		var pngs [][]byte
		for _, l := range []i18n.Lang{i18n.En, i18n.Zh} {
			chart.Lang = l
			png, err := p.Loss(chart)
			if err != nil {
				t.Fatal(err)
			}
			pngs = append(pngs, png)
		}
		if bytes.Equal(pngs[0], pngs[1]) {
			t.Error("the zh chart is the en chart")
		}
		// A title is laid out in runs: Latin in Liberation, Chinese in the CJK font.
		l := p.line("图像分类 · run #5", sizeTitle, true, color.Black)
		var faces []string
		for _, r := range l.runs {
			faces = append(faces, string(r.style.Font.Typeface)+":"+r.s)
		}
		if got, want := strings.Join(faces, "|"), "CJK:图像分类 |Liberation:· run #5"; got != want {
			t.Errorf("runs %q, want %q", got, want)
		}
	})
	t.Run("bad file", func(t *testing.T) {
		dir := t.TempDir()
		bad := filepath.Join(dir, "bad.ttf")
		os.WriteFile(bad, []byte("not a font"), 0o644)
		for _, path := range []string{bad, filepath.Join(dir, "missing.ttc")} {
			if _, err := New(Options{Font: path}); err == nil || !strings.Contains(err.Error(), path) {
				t.Errorf("New(%s): err %v, want one naming the file", path, err)
			}
		}
		// A Latin-only font draws no Chinese: refused, not used for boxes.
		latin := filepath.Join(dir, "latin.ttf")
		os.WriteFile(latin, liberationsansregular.TTF, 0o644)
		if _, err := New(Options{Font: latin}); err == nil || !strings.Contains(err.Error(), "Chinese") {
			t.Errorf("New(latin font): err %v, want a no-Chinese error", err)
		}
	})
}

// TestAlignedFace builds a collection whose tables are not on four-byte
// boundaries (as in wqy-zenhei.ttc), which x/image/font/sfnt refuses, and
// checks that alignedFace makes it readable.
func TestAlignedFace(t *testing.T) {
	ttf := liberationsansregular.TTF
	n := int(binary.BigEndian.Uint16(ttf[4:]))
	head := 12 + 16*n
	const shift = 16 + 2 // the TTC header, then two bytes that misalign every table
	var data []byte
	data = append(data, "ttcf"...)
	data = binary.BigEndian.AppendUint32(data, 0x00010000)
	data = binary.BigEndian.AppendUint32(data, 1)
	data = binary.BigEndian.AppendUint32(data, 16)
	font := append([]byte(nil), ttf[:head]...)
	for i := range n {
		rec := font[12+16*i:]
		binary.BigEndian.PutUint32(rec[8:], binary.BigEndian.Uint32(rec[8:])+shift)
	}
	data = append(data, font...)
	data = append(data, 0, 0)
	data = append(data, ttf[head:]...)

	coll, err := sfnt.ParseCollection(data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := coll.Font(0); err == nil {
		t.Fatal("sfnt read the misaligned font: the test no longer shows the problem")
	}
	fixed, err := alignedFace(data, 0)
	if err != nil {
		t.Fatal(err)
	}
	f, err := sfnt.ParseReaderAt(fixed)
	if err != nil {
		t.Fatalf("aligned font: %v", err)
	}
	var buf sfnt.Buffer
	if !covers(f, &buf, "Loss 0.25") {
		t.Error("aligned font lost glyphs")
	}
	// The whole view, read in odd-sized pieces, is a font file too, whose
	// tables hold the original bytes.
	whole, err := io.ReadAll(io.NewSectionReader(fixed, 0, fixed.size))
	if err != nil {
		t.Fatal(err)
	}
	var pieces []byte
	piece := make([]byte, 7)
	for off := int64(0); off < fixed.size; off += int64(len(piece)) {
		k, err := fixed.ReadAt(piece, off)
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
		pieces = append(pieces, piece[:k]...)
	}
	if !bytes.Equal(whole, pieces) {
		t.Error("reads in pieces differ from one read")
	}
	if _, err := sfnt.Parse(whole); err != nil {
		t.Fatalf("aligned font read whole: %v", err)
	}
	for i := range n {
		rec := whole[12+16*i:]
		o, l := binary.BigEndian.Uint32(rec[8:]), binary.BigEndian.Uint32(rec[12:])
		orig := ttf[12+16*i:]
		oo := binary.BigEndian.Uint32(orig[8:])
		if o%4 != 0 || !bytes.Equal(whole[o:o+l], ttf[oo:oo+l]) {
			t.Errorf("table %d: at %d, bytes differ from the original's or misaligned", i, o)
		}
	}
	if _, err := alignedFace(data[:20], 0); err == nil {
		t.Error("truncated file: want an error")
	}
}

// BenchmarkLoss draws a noisy loss series with its smoothed line to PNG.
func BenchmarkLoss(b *testing.B) {
	p := painter(b, FontNone)
	for _, n := range []int{1_000, 100_000, 1_000_000} {
		pts := noisyLoss(n, 42, 0.05)
		b.Run(units.SI(float64(n))+"pts", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Loss(LossChart{Title: "bench", Smoothing: 0.6, Series: []Series{{Name: "loss", Points: pts}}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestConcurrent draws from several goroutines with one Painter (the bot
// answers chats concurrently); run with -race.
func TestConcurrent(t *testing.T) {
	p := Default()
	pts := noisyLoss(5000, 9, 0.05)
	errs := make(chan error, 2)
	for i := range 2 {
		go func() {
			title := "并发 · run #" + units.SI(float64(i))
			_, err := p.Loss(LossChart{Title: title, Smoothing: 0.6, Series: []Series{{Name: "loss", Points: pts}}})
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// A short series is not smoothed (4 points of val_loss ended their bold
// line at 0.113 with the last value at 0.0756); a longer one is smoothed at
// most with a window of a tenth of its points.
func TestSmoothingOfShortSeries(t *testing.T) {
	for _, c := range []struct {
		w    float64
		n    int
		want float64
	}{
		{0.6, 4, 0}, {0.6, 19, 0}, {0.6, 20, 0.5}, {0.6, 100, 0.6}, {0.99, 100, 0.9}, {0.99, 100000, 0.99}, {0, 1000, 0},
	} {
		if got := SmoothingFor(c.w, c.n); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("SmoothingFor(%g, %d) = %g, want %g", c.w, c.n, got, c.want)
		}
	}
	// The 4 points draw without a smoothed line: the picture is the raw one.
	pts := []XY{{1, 0.52}, {2, 0.2}, {3, 0.12}, {4, 0.0756}}
	a, err := Default().Loss(LossChart{Title: "t", Series: []Series{{Name: "val_loss", Points: pts}}, Smoothing: 0.6})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Default().Loss(LossChart{Title: "t", Series: []Series{{Name: "val_loss", Points: pts}}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("a 4-point series is drawn differently with smoothing 0.6 than without")
	}
}

// A chart of metrics that are not losses is titled by them.
func TestLossChartKind(t *testing.T) {
	pt, err := New(Options{Font: "none"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		chart LossChart
		want  string
	}{
		{LossChart{Series: []Series{{Name: "acc"}}}, "acc"},
		{LossChart{Series: []Series{{Name: "acc"}, {Name: "lr"}}}, "acc, lr"},
		{LossChart{Series: []Series{{Name: "val_loss"}, {Name: "acc"}}}, "Loss"},
		{LossChart{Series: []Series{{Name: "acc"}}, KindZH: "对比", KindEN: "Comparison"}, "Comparison"},
	} {
		if got := pt.lossKind(c.chart); got != c.want {
			t.Errorf("%+v: %q, want %q", c.chart.Series, got, c.want)
		}
	}
}

// TestMappedFontOutlivesCollections draws Chinese with a painter whose CJK
// font file is mapped, after collections that released the mappings of
// painters no longer used: each painter's mapping lives as long as it.
func TestMappedFontOutlivesCollections(t *testing.T) {
	if _, err := os.Stat(wqyZenHei); err != nil {
		t.Skipf("no %s (apt install fonts-wqy-zenhei): %v", wqyZenHei, err)
	}
	chart := LossChart{Title: "验证损失 · 训练", Smoothing: 0.6, Series: []Series{{Name: "损失", Points: noisyLoss(500, 1, 0.05)}}}
	first, err := painter(t, wqyZenHei).Loss(chart)
	if err != nil {
		t.Fatal(err)
	}
	p := painter(t, wqyZenHei)
	for range 3 {
		painter(t, wqyZenHei) // dropped at once
		runtime.GC()
	}
	again, err := p.Loss(chart)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, again) {
		t.Error("the same chart drawn after collections differs")
	}
}
