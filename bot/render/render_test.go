package render

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/logparse"
)

func status(id, step, total int64, loss float64) trainer.Status {
	return trainer.Status{
		Run:         &trainer.Run{ID: id, Job: "demo", Origin: "tg:1", State: trainer.StateRunning, Outcome: trainer.OutcomeRunning},
		Progress:    logparse.Progress{Step: step, TotalSteps: total, Epoch: math.NaN()},
		Last:        []trainer.Metric{{Name: "loss", Value: loss}, {Name: "acc", Value: 0.8}},
		StepsPerSec: 12.5, Elapsed: 90 * time.Second, ETA: 2 * time.Minute,
	}
}

func TestProgressText(t *testing.T) {
	st := status(12, 615, 1500, 0.0686)
	gpu, total, peak := int64(7<<30), int64(80<<30), int64(15<<29)
	st.Run.PeakGPUMem = &peak
	got := ProgressText(i18n.ZhEn, st, &history.RunMemory{GPUBytes: &gpu, GPUTotal: &total})
	for _, want := range []string{"run #12 · demo · running for 1m30s", "▓▓▓▓░░░░░░ 41%", "step 615/1500", "loss 0.0686", "12.5 steps/s", "ETA 2m", "GPU 7.00 GiB / 80.00 GiB", "peak 7.50 GiB"} {
		if !strings.Contains(got, want) {
			t.Errorf("progress text lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "acc") {
		t.Errorf("only the loss belongs in the live progress:\n%s", got)
	}
	empty := status(3, 0, 0, 0)
	empty.Last = nil
	if got := ProgressText(i18n.ZhEn, empty, nil); !strings.Contains(got, "waiting for the first metric") {
		t.Errorf("before the first metric:\n%s", got)
	}
	end := trainer.Event{Kind: trainer.EventEnded, At: time.Now(), Run: &trainer.Run{ID: 12, Job: "demo", Outcome: trainer.OutcomeFinished,
		Steps: 1500, Total: 1500, StartedAt: time.Now().Add(-time.Minute), EndedAt: time.Now()}}
	if got := FinalProgressText(i18n.ZhEn, end); !strings.Contains(got, "✅ run #12 (demo) finished") || !strings.Contains(got, "▓▓▓▓▓▓▓▓▓▓ 100%") {
		t.Errorf("final:\n%s", got)
	}
}

func TestEndReportNamesTheOutcome(t *testing.T) {
	peak := int64(3 << 30)
	run := &trainer.Run{ID: 3, Job: "j", StartedAt: time.Now().Add(-90 * time.Second), Outcome: trainer.OutcomeOOM,
		Detail: "CUDA out of memory on GPU 0: tried to allocate 2.00 GiB", PeakGPUMem: &peak}
	got := EndReport(i18n.ZhEn, trainer.Event{Kind: trainer.EventEnded, Run: run, At: time.Now()}, "", true)
	for _, want := range []string{"💥 run #3 (j) ran out of memory after 1m30s", "peak GPU memory 3.00 GiB", "tried to allocate 2.00 GiB"} {
		if !strings.Contains(got, want) {
			t.Errorf("report %q lacks %q", got, want)
		}
	}
}

func TestMetricGoal(t *testing.T) {
	cases := map[string]int{
		"loss": -1, "val_loss": -1, "train/loss": -1, "ppl": -1, "val_wer": -1, "error_rate": -1,
		"acc": 1, "val_acc": 1, "accuracy": 1, "top1": 1, "eval/f1": 1, "mAP": 1, "rouge_l": 1, "acc@1": 1,
		"lr": 0, "epoch": 0, "grad_norm": 0, "throughput": 0, "step_time": 0,
	}
	for name, want := range cases {
		if got := MetricGoal(name); got != want {
			t.Errorf("MetricGoal(%q) = %d, want %d", name, got, want)
		}
	}
}

func TestStatusOfSlurmRuns(t *testing.T) {
	queued := trainer.Status{Run: &trainer.Run{ID: 5, Job: "big", Runner: "slurm", SlurmJobID: "4242"}, Elapsed: 3 * time.Minute,
		Waiting: "queued in Slurm (job 4242, reason: Resources, partition gpu)", Progress: logparse.Progress{Epoch: math.NaN()}}
	running := trainer.Status{Run: &trainer.Run{ID: 5, Job: "big", Runner: "slurm", SlurmJobID: "4242", Node: "gpu01"}, Elapsed: 3 * time.Minute,
		Progress: logparse.Progress{Epoch: math.NaN()}}
	for _, c := range []struct {
		got, want string
	}{
		{StatusText(i18n.ZhEn, queued), "run #5 · big · queued in Slurm (job 4242, reason: Resources, partition gpu) for 3m"},
		{ProgressText(i18n.ZhEn, queued, nil), "▶️ run #5 · big · queued in Slurm (job 4242, reason: Resources, partition gpu) for 3m"},
		{StatusText(i18n.ZhEn, running), "run #5 · big · running on gpu01 (Slurm job 4242) for 3m"},
	} {
		if !strings.HasPrefix(c.got, c.want) {
			t.Errorf("got %q, want %q…", c.got, c.want)
		}
	}
	running.Stopping = true
	if got := StatusText(i18n.ZhEn, running); !strings.HasPrefix(got, "run #5 · big · stopping (running on gpu01 (Slurm job 4242)) for") {
		t.Errorf("stopping: %q", got)
	}
}

// In English the summary of an out-of-memory error is the supervisor's
// own; in Chinese it says the same from its parts.
func TestOOMSummaryInBothLanguages(t *testing.T) {
	o, ok := trainer.DetectOOM("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.25 GiB is free. " +
		"Of the allocated memory 70.00 GiB is allocated by PyTorch, and 6.50 GiB is reserved by PyTorch but unallocated.")
	if !ok {
		t.Fatal("not an OOM line")
	}
	if got, want := OOMSummary(i18n.En, o), o.Summary(); got != want {
		t.Errorf("en %q, want the supervisor's %q", got, want)
	}
	want := "CUDA 显存不足（GPU 0）：尝试分配 2.00 GiB（2147483648 字节）；剩余 1.25 GiB，共 79.15 GiB；PyTorch 已分配 70.00 GiB；PyTorch 保留但未分配 6.50 GiB"
	if got := OOMSummary(i18n.Zh, o); got != want {
		t.Errorf("zh %q,\nwant %q", got, want)
	}
}

// A byte-valued metric reads in binary units in 状态, the live progress and
// the end report (the same metrics line), as the memory lines do: 状态 showed "memory 2.517e+08".
func TestByteMetricsInBinaryUnits(t *testing.T) {
	st := trainer.Status{Run: &trainer.Run{ID: 3, Job: "mnist"}, Elapsed: time.Minute,
		Progress: logparse.Progress{Step: 100, TotalSteps: 1000, Epoch: math.NaN()},
		Last:     []trainer.Metric{{Name: "loss", Value: 0.25}, {Name: "memory", Value: 2.517e8}, {Name: "mem_mb", Value: 2400}}}
	for what, text := range map[string]string{
		"status": StatusText(i18n.ZhEn, st),
	} {
		if !strings.Contains(text, "memory 240.04 MiB") || strings.Contains(text, "2.517e+08") {
			t.Errorf("%s: %q, want memory 240.04 MiB", what, text)
		}
		if strings.Contains(text, "mem_mb") && !strings.Contains(text, "mem_mb 2400.0000") {
			t.Errorf("%s: %q: mem_mb is megabytes, not bytes", what, text)
		}
	}
}

// The OOM alert of a request far past the memory there is (512 GiB on a
// 23 GiB host) says that halving cannot help and what can, names the
// failing line, and calls it 内存 in Chinese: it suggested halving
// batch_size, dropped the line, and said 显存不足 of host memory.
func TestOOMAlertWhenHalvingCannotHelp(t *testing.T) {
	o, ok := trainer.DetectOOM("numpy.core._exceptions._ArrayMemoryError: Unable to allocate 512. GiB for an array with shape (68719476736,) and data type float64")
	if !ok {
		t.Fatal("not an OOM")
	}
	o.TotalBytes, o.Frame = 23<<30, "train.py:28"
	lo, hi := 1.0, 4096.0
	job := &trainer.Job{Name: "mlp", Params: map[string]trainer.ParamSpec{"batch_size": {Type: trainer.ParamInt, Min: &lo, Max: &hi, Default: "64", HasDefault: true}}}
	run := &trainer.Run{ID: 9, Job: "mlp", Params: map[string]string{"batch_size": "64"}}
	ev := trainer.Event{Kind: trainer.EventAlert, Run: run, Job: job, Alert: &trainer.Alert{Kind: trainer.OutcomeOOM, Text: o.Summary(), OOM: o}}
	en := OOMAlertText(i18n.En, ev)
	for _, want := range []string{"ran out of host memory", "at train.py:28", "halving the batch cannot help: half of 512.00 GiB is still more than the 23.00 GiB there is"} {
		if !strings.Contains(en, want) {
			t.Errorf("en alert lacks %q:\n%s", want, en)
		}
	}
	if strings.Contains(en, "batch_size=32") || strings.Contains(en, "accumulat") {
		t.Errorf("en alert still suggests halving:\n%s", en)
	}
	zh := OOMAlertText(i18n.Zh, ev)
	for _, want := range []string{"内存不足", "出错位置 train.py:28", "减半 batch 也没用"} {
		if !strings.Contains(zh, want) {
			t.Errorf("zh alert lacks %q:\n%s", want, zh)
		}
	}
	if strings.Contains(zh, "显存") {
		t.Errorf("zh alert of a host OOM says 显存:\n%s", zh)
	}
}
