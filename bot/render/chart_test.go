package render

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/internal/historytest"

	"github.com/trainbot/trainbot/trainer"
)

// The history fixtures, shared with the other packages that read it.
var (
	openHistory    = historytest.OpenHistory
	addRun         = historytest.AddRun
	addLoss        = historytest.AddLoss
	addMemory      = historytest.AddMemory
	decodePNG      = historytest.DecodePNG
	englishPainter = historytest.EnglishPainter
	decay          = historytest.Decay
)

func TestChartsLoss(t *testing.T) {
	ctx := context.Background()
	st := openHistory(t)
	c := &Charts{Data: st, Painter: englishPainter(t)}
	r := addRun(t, st, nil, 10*time.Minute, 2000)
	addLoss(st, r, "loss", 200, 10, decay)
	addLoss(st, r, "val_loss", 20, 100, func(i int) float64 { return decay(i*10) + 0.1 })
	addLoss(st, r, "acc", 20, 100, func(i int) float64 { return 0.5 })

	img, err := c.Loss(ctx, r, LossOptions{})
	if err != nil {
		t.Fatal(err)
	}
	decodePNG(t, img.PNG)
	if want := "run #1 demo · loss, val_loss · 220 points"; img.Caption != want {
		t.Errorf("caption %q, want %q", img.Caption, want)
	}
	if img.Name != "run-1-loss.png" {
		t.Errorf("name %q", img.Name)
	}
	img, err = c.Loss(ctx, r, LossOptions{Metric: "ACC", XTime: true})
	if err != nil {
		t.Fatal(err)
	}
	decodePNG(t, img.PNG)
	if img.Name != "run-1-acc.png" || !strings.Contains(img.Caption, "acc · 20 points") {
		t.Errorf("name %q caption %q", img.Name, img.Caption)
	}
	_, err = c.Loss(ctx, r, LossOptions{Metric: "bleu"})
	if !errors.Is(err, ErrNoMetric) || err.Error() != `run #1 has no metric "bleu"; it has loss, val_loss, acc` {
		t.Errorf("err %v", err)
	}
}

func TestChartsEmptyOneAndNaN(t *testing.T) {
	ctx := context.Background()
	st := openHistory(t)
	c := &Charts{Data: st, Painter: englishPainter(t)}

	empty := addRun(t, st, nil, time.Minute, 0)
	_, err := c.Loss(ctx, empty, LossOptions{})
	if !errors.Is(err, ErrNoMetric) || err.Error() != "run #1 has no metric yet, so there is nothing to draw" {
		t.Errorf("empty run: %v", err)
	}
	_, err = c.Memory(ctx, empty)
	if !errors.Is(err, ErrNoSamples) || err.Error() != "run #1 has no memory sample, so there is no memory chart" {
		t.Errorf("empty run memory: %v", err)
	}
	_, err = c.Device(ctx, empty)
	if !errors.Is(err, ErrNoSamples) || !strings.Contains(err.Error(), "no GPU was sampled while run #1 ran") {
		t.Errorf("empty run devices: %v", err)
	}

	one := addRun(t, st, nil, time.Minute, 1)
	addLoss(st, one, "loss", 1, 1, func(int) float64 { return 0.7 })
	img, err := c.Loss(ctx, one, LossOptions{})
	if err != nil {
		t.Fatalf("one point: %v", err)
	}
	decodePNG(t, img.PNG)

	nan := addRun(t, st, nil, time.Minute, 5)
	addLoss(st, nan, "loss", 5, 1, func(i int) float64 {
		return []float64{math.NaN(), math.Inf(1), math.NaN(), math.Inf(-1), math.NaN()}[i]
	})
	_, err = c.Loss(ctx, nan, LossOptions{})
	if !errors.Is(err, ErrNoMetric) || err.Error() != "run #3 has no finite value of loss to draw (5 points, all NaN or Inf)" {
		t.Errorf("all NaN: %v", err)
	}

	some := addRun(t, st, nil, time.Minute, 50)
	addLoss(st, some, "loss", 50, 1, func(i int) float64 {
		if i%10 == 9 {
			return math.NaN()
		}
		return decay(i)
	})
	img, err = c.Loss(ctx, some, LossOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(img.Caption, "50 points (5 NaN/Inf)") {
		t.Errorf("caption %q", img.Caption)
	}
}

func TestChartsMemoryAndDevice(t *testing.T) {
	ctx := context.Background()
	st := openHistory(t)
	c := &Charts{Data: st, Painter: englishPainter(t)}
	r := addRun(t, st, nil, 30*time.Minute, 1000)
	addMemory(t, st, r, 360, func(i int) int64 { return int64(10+i%7) << 30 }, func(i int) int64 { return 3 << 30 }, 80<<30)
	img, err := c.Memory(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	decodePNG(t, img.PNG)
	if want := "run #1 demo · memory · peak GPU 16.00 GiB of 80.00 GiB · peak host 3.00 GiB"; img.Caption != want {
		t.Errorf("caption %q, want %q", img.Caption, want)
	}

	cpu := addRun(t, st, nil, time.Minute, 10)
	addMemory(t, st, cpu, 30, nil, func(i int) int64 { return int64(100+i) << 20 }, 0)
	img, err = c.Memory(ctx, cpu)
	if err != nil {
		t.Fatal(err)
	}
	if want := "run #2 demo · host memory · peak host 129.00 MiB"; img.Caption != want {
		t.Errorf("CPU-only caption %q, want %q", img.Caption, want)
	}

	// One peak per run: a recorded peak above every sample (VmHWM between
	// two samples) is what the caption and the end report both say, with
	// how it was measured. The caption used to say the highest sample,
	// 129.00 MiB, beside an end report of 140.00 MiB.
	hwm := int64(140 << 20)
	cpu.PeakHostMem, cpu.PeakHostHow = &hwm, history.PeakMain
	img, err = c.Memory(ctx, cpu)
	if err != nil {
		t.Fatal(err)
	}
	if want := "run #2 demo · host memory · peak host 140.00 MiB (VmHWM, exact)"; img.Caption != want {
		t.Errorf("caption with a recorded peak %q, want %q", img.Caption, want)
	}
	if end := peakWords(i18n.En, cpu); !strings.Contains(end, "140.00 MiB") {
		t.Errorf("the end report says %q", end)
	}
	// In Chinese a chart of host memory alone is 内存, not 显存 (issue
	// 31 item 9), and how its peak was measured is said in Chinese.
	zh := &Charts{Data: st, Painter: englishPainter(t), Lang: i18n.Zh}
	img, err = zh.Memory(ctx, cpu)
	if err != nil {
		t.Fatal(err)
	}
	if want := "训练 #2 demo · 内存 · 内存峰值 140.00 MiB（其进程的 VmHWM，精确值）"; img.Caption != want {
		t.Errorf("zh caption %q, want %q", img.Caption, want)
	}

	// Device samples: two GPUs during run 1, one sample long before it.
	var ds []history.DeviceSample
	for i := range 100 {
		at := r.StartedAt.Add(time.Duration(i) * 18 * time.Second)
		ds = append(ds, history.DeviceSample{T: at, Device: 0, Name: "NVIDIA H100", MemUsed: 10 << 30, MemTotal: 80 << 30, Util: 90, TempC: 60 + i/10},
			history.DeviceSample{T: at, Device: 1, Name: "NVIDIA H100", MemUsed: 1 << 30, MemTotal: 80 << 30, Util: -1, TempC: -1})
	}
	ds = append(ds, history.DeviceSample{T: r.StartedAt.Add(-time.Hour), Device: 2, Name: "old", Util: 5, TempC: 30})
	if err := st.AddDeviceSamples(ctx, ds); err != nil {
		t.Fatal(err)
	}
	devs, err := st.DevicesBetween(ctx, r.StartedAt, r.EndedAt)
	if err != nil || len(devs) != 2 || devs[0] != 0 || devs[1] != 1 {
		t.Fatalf("DevicesBetween = %v, %v; want [0 1]", devs, err)
	}
	img, err = c.Device(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	decodePNG(t, img.PNG)
	if want := "run #1 demo · utilisation and temperature · GPU 0 · NVIDIA H100, GPU 1 · NVIDIA H100"; img.Caption != want {
		t.Errorf("caption %q, want %q", img.Caption, want)
	}
}

func TestCompare(t *testing.T) {
	ctx := context.Background()
	st := openHistory(t)
	c := &Charts{Data: st, Painter: englishPainter(t)}
	// Gradient checkpointing: 58 % less GPU memory for 24 % more time.
	a := addRun(t, st, map[string]string{"batch_size": "64", "grad_ckpt": "false"}, 100*time.Minute, 6000)
	b := addRun(t, st, map[string]string{"batch_size": "64", "grad_ckpt": "true"}, 124*time.Minute, 6000)
	addLoss(st, a, "loss", 60, 100, decay)
	addLoss(st, b, "loss", 60, 100, func(i int) float64 { return decay(i) * 1.02 })
	addMemory(t, st, a, 10, func(int) int64 { return 50 << 30 }, func(int) int64 { return 4 << 30 }, 80<<30)
	addMemory(t, st, b, 10, func(int) int64 { return 21 << 30 }, func(int) int64 { return 4 << 30 }, 80<<30)

	img, text, err := c.Compare(ctx, []*trainer.Run{a, b}, LossOptions{})
	if err != nil {
		t.Fatal(err)
	}
	decodePNG(t, img.PNG)
	if img.Name != "compare-1-2.png" {
		t.Errorf("name %q", img.Name)
	}
	for _, want := range []string{
		"对比 compare · loss · against run #1",
		"✅ #1 demo · finished · grad_ckpt=false",
		"✅ #2 demo · finished · grad_ckpt=true",
		"time 2h04m (+24 %)",
		"loss final 0.4667 (+2 %) · best 0.4667 (+2 %)",
		"6000 steps · 0.806 steps/s (−19 %)",
		"peak GPU 21.00 GiB (−58 %) · host 4.00 GiB (±0 %)",
		"#2 vs #1: peak GPU memory −58 %, time +24 %, final loss +2 %",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "batch_size") {
		t.Errorf("text shows a parameter that does not differ:\n%s", text)
	}
	// steps/s comes from the points: 5900 steps between the first and the
	// last point, read 59/60 of 100 minutes apart for run 1.
	cmp, _, err := c.comparison(ctx, []*trainer.Run{a, b}, "", false, false)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cmp.Runs[0].StepsPerSec, 1.0; math.Abs(got-want) > 1e-9 {
		t.Errorf("steps/s %g, want %g", got, want)
	}

	// A run without the metric still gets its line in the table.
	e := addRun(t, st, nil, time.Minute, 0)
	_, text, err = c.Compare(ctx, []*trainer.Run{a, e}, LossOptions{Metric: "loss"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "no loss logged") {
		t.Errorf("text:\n%s", text)
	}
	_, _, err = c.Compare(ctx, []*trainer.Run{a, b}, LossOptions{Metric: "bleu"})
	if !errors.Is(err, ErrNoMetric) {
		t.Errorf("unknown metric: %v", err)
	}
	_, _, err = c.Compare(ctx, []*trainer.Run{e, e}, LossOptions{})
	if !errors.Is(err, ErrNoMetric) {
		t.Errorf("no metric anywhere: %v", err)
	}
}

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		v, ref float64
		want   string
	}{{124, 100, "+24 %"}, {42, 100, "−58 %"}, {100.2, 100, "±0 %"}, {1, 0, ""}, {math.NaN(), 1, ""}, {-2, -1, "−100 %"}} {
		if got := percent(i18n.En, c.v, c.ref); got != c.want {
			t.Errorf("percent(%g, %g) = %q, want %q", c.v, c.ref, got, c.want)
		}
		// Chinese: no space before the sign, full-width brackets around it.
		zh := strings.ReplaceAll(c.want, " %", "%")
		if got := percent(i18n.Zh, c.v, c.ref); got != zh {
			t.Errorf("zh percent(%g, %g) = %q, want %q", c.v, c.ref, got, zh)
		}
		if zh != "" && ratio(i18n.Zh, c.v, c.ref) != "（"+zh+"）" {
			t.Errorf("zh ratio(%g, %g) = %q", c.v, c.ref, ratio(i18n.Zh, c.v, c.ref))
		}
	}
}

// A chart for a Chinese chat has a Chinese caption, and says in Chinese
// why there is nothing to draw (still matching its sentinel).
func TestChartsInChinese(t *testing.T) {
	ctx := context.Background()
	st := openHistory(t)
	c := &Charts{Data: st, Painter: englishPainter(t), Lang: i18n.Zh}
	r := addRun(t, st, nil, 10*time.Minute, 2000)
	if _, err := c.Loss(ctx, r, LossOptions{}); !errors.Is(err, ErrNoMetric) || err.Error() != "训练 #1 还没有指标，没有可画的" {
		t.Errorf("no metric: %v", err)
	}
	addLoss(st, r, "loss", 200, 10, decay)
	img, err := c.Loss(ctx, r, LossOptions{})
	if err != nil {
		t.Fatal(err)
	}
	decodePNG(t, img.PNG)
	if want := "训练 #1 demo · loss · 200 个点"; img.Caption != want {
		t.Errorf("caption %q, want %q", img.Caption, want)
	}
	if _, err := c.Memory(ctx, r); !errors.Is(err, ErrNoSamples) || !strings.Contains(err.Error(), "画不了内存图") {
		t.Errorf("no samples: %v", err)
	}
}

// The comparison table in each language; zh+en is the table it always was.
func TestComparisonTextInBothLanguages(t *testing.T) {
	c := Comparison{Metric: "loss", Runs: []RunSummary{
		{Run: &trainer.Run{ID: 12, Job: "mnist", Outcome: trainer.OutcomeFinished}, Duration: 10 * time.Minute, Steps: 1000, StepsPerSec: 1.67,
			HasMetric: true, Final: 0.1, Best: 0.09, PeakGPU: 8 << 30, PeakHost: -1, Differs: []string{"batch_size=32"}},
		{Run: &trainer.Run{ID: 13, Job: "mnist", Outcome: trainer.OutcomeFinished}, Duration: 8 * time.Minute, Steps: 1000, StepsPerSec: 2.08,
			HasMetric: true, Final: 0.12, Best: 0.1, PeakGPU: 12 << 30, PeakHost: -1, Differs: []string{"batch_size=64"}},
	}}
	mix := c.Text(i18n.ZhEn)
	for _, want := range []string{"对比 compare · loss · against run #12", "✅ #12 mnist · finished · batch_size=32", "time 10m · 1000 steps", "#13 vs #12: peak GPU memory +50 %, time −20 %"} {
		if !strings.Contains(mix, want) {
			t.Errorf("zh+en lacks %q:\n%s", want, mix)
		}
	}
	zh := c.Text(i18n.Zh)
	for _, want := range []string{"对比 · loss · 以训练 #12 为基准", "✅ #12 mnist · 已完成 · batch_size=32", "用时 10 分钟 · 1000 步", "loss：最终 0.1000", "峰值：显存 8.00 GiB", "#13 对比 #12：显存峰值 +50%，用时 −20%"} {
		if !strings.Contains(zh, want) {
			t.Errorf("zh lacks %q:\n%s", want, zh)
		}
	}
}

// stuckFlush is a history whose point writer never catches up.
type stuckFlush struct{ ChartData }

func (stuckFlush) Flush(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// A chart asked for while the point writer is behind (niced, on a host
// whose cores the training holds) is drawn from what is written once the
// wait is over; a caller's own end is still an error.
func TestChartsDrawWhatIsWrittenWhenTheWriterIsBehind(t *testing.T) {
	defer func(w time.Duration) { flushWait = w }(flushWait)
	flushWait = 50 * time.Millisecond
	st := openHistory(t)
	r := addRun(t, st, nil, 10*time.Minute, 2000)
	addLoss(st, r, "loss", 200, 10, decay)
	if err := st.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := &Charts{Data: stuckFlush{st}, Painter: englishPainter(t)}
	img, err := c.Loss(context.Background(), r, LossOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "run #1 demo · loss · 200 points"; img.Caption != want {
		t.Errorf("caption %q, want %q", img.Caption, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Loss(ctx, r, LossOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("with the caller's context ended: %v, want context.Canceled", err)
	}
}
