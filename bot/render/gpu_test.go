package render

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/trainbot/trainbot/gpu"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/trainer"
)

const gb = 1 << 30

func i64(v int64) *int64 { return &v }

// h100At is a snapshot of one 80 GiB device at pct% memory and tempC, with
// run 3's process holding 10 GiB of it when run is true (gpu's alerter
// tests sample the same).
func h100At(pct float64, tempC int, run bool) gpu.Snapshot {
	d := gpu.Device{Index: 0, Name: "NVIDIA H100 80GB HBM3", MemTotal: 80 * gb, MemUsed: uint64(pct / 100 * 80 * gb), TempC: tempC, Util: 99}
	s := gpu.Snapshot{Available: true, Devices: []gpu.Device{d}}
	if run {
		s.Processes = []gpu.Process{{PID: 42, Device: 0, MemUsed: 10 * gb, RunID: 3}}
		s.Runs = []gpu.RunUsage{{RunID: 3, PID: 40, GPUBytes: i64(10 * gb), Devices: []int{0}, HostBytes: i64(gb)}}
	}
	return s
}

// The alerts as gpu raises them (its tests check the facts), worded.
func TestGPUAlert(t *testing.T) {
	h100 := h100At(50, 50, true).Devices[0]
	xid := func(x uint64) gpu.Alert {
		return gpu.Alert{Kind: gpu.AlertXid, Device: 0, RunID: 3, Sampled: h100, Runs: []int64{3}, Xid: x}
	}
	mem := gpu.Alert{Kind: gpu.AlertMemory, Device: 0, RunID: 3, Sampled: h100At(96, 60, true).Devices[0], Held: 10 * gb,
		Thresholds: gpu.Thresholds{MemoryPercent: 95}}
	hot := gpu.Alert{Kind: gpu.AlertTemperature, Device: 0, RunID: 3, Sampled: h100At(50, 86, true).Devices[0], Runs: []int64{3},
		Thresholds: gpu.Thresholds{TempC: 85}}
	unknown := gpu.Alert{Kind: gpu.AlertXid, Device: -1, Sampled: gpu.Device{Index: -1}, Xid: 48}
	ecc := gpu.Alert{Kind: gpu.AlertECC, Device: 0, RunID: 3, Sampled: h100, Runs: []int64{3}}
	for _, c := range []struct {
		name string
		a    gpu.Alert
		want []string
	}{
		{"memory", mem, []string{"GPU 0 (NVIDIA H100 80GB HBM3) memory at 96%", "run #3 holds 10.00 GiB", "alert at 95%"}},
		{"temperature", hot, []string{"GPU 0 (NVIDIA H100 80GB HBM3) at 86°C (alert at 85°C)", "Run #3 uses it."}},
		{"xid 79", xid(79), []string{"🛑 GPU 0 (NVIDIA H100 80GB HBM3) reported Xid 79: the GPU has fallen off the bus. Run #3 uses it. " + i18n.En.T(i18n.XidAdviceReboot)}},
		{"xid 13", xid(13), []string{"Xid 13: graphics engine exception", "CUDA_LAUNCH_BLOCKING=1"}},
		{"unknown xid", xid(999), []string{"reported Xid 999. Run #3 uses it. See NVIDIA's Xid catalog"}},
		{"double bit ECC", ecc, []string{"double bit ECC error"}},
		{"unknown device", unknown, []string{"🛑 a GPU reported Xid 48: double bit ECC error"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := GPUAlert(i18n.ZhEn, c.a)
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("got %q, want it to contain %q", got, w)
				}
			}
		})
	}
	if got := GPUAlert(i18n.ZhEn, xid(79)); !strings.HasPrefix(got, "🛑 GPU 0 (NVIDIA H100 80GB HBM3) reported Xid 79") {
		t.Errorf("zh+en xid 79 = %q", got)
	}
	for _, x := range []uint64{79, 48} {
		if m, _ := XidMeaning(i18n.En, x); m == "" {
			t.Errorf("Xid %d has no meaning", x)
		}
	}
	// The same alert in Chinese.
	if got, want := GPUAlert(i18n.Zh, xid(79)), "🛑 GPU 0 (NVIDIA H100 80GB HBM3) 报告了 Xid 79：GPU 从总线上掉了。训练 #3 在用它。重启机器之前这块显卡都无法访问（重置不够）；检查供电、散热和插接。"; got != want {
		t.Errorf("zh xid 79 = %q,\nwant %q", got, want)
	}
}

func TestGPUTable(t *testing.T) {
	s := h100At(50, -1, true)
	s.Devices[0].Util = -1
	s.Devices[0].PowerMilliW = 350_500
	s.Devices[0].PowerLimitMilliW = 700_000
	s.Processes[0].Name = "python"
	s.Host = gpu.Host{MemTotal: 64 * gb, MemAvailable: 48 * gb}
	want := "[0] NVIDIA H100 80GB HBM3 |    --   -- | 40960 / 81920 MiB | 350 / 700 W\n" +
		"    pid 42 python 10240 MiB · run #3\n" +
		"host memory 16.00 GiB used of 64.00 GiB (48.00 GiB available)\n" +
		"run #3 (pid 40): GPU 10.00 GiB on GPU 0 · host 1.00 GiB in 0 processes"
	if got := GPUTable(i18n.ZhEn, s); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	none := gpu.Snapshot{Reason: "no NVIDIA driver (libnvidia-ml.so.1 not found)", Host: gpu.Host{MemTotal: 8 * gb, MemAvailable: 6 * gb},
		Runs: []gpu.RunUsage{{RunID: 5, PID: 77, HostBytes: i64(300 << 20), Processes: 1}}}
	want = "No NVIDIA GPU: no NVIDIA driver (libnvidia-ml.so.1 not found). Memory below is host memory.\n" +
		"host memory 2.00 GiB used of 8.00 GiB (6.00 GiB available)\n" +
		"run #5 (pid 77): host 300.00 MiB in 1 process"
	if got := GPUTable(i18n.ZhEn, none); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	want = "没有 NVIDIA 显卡：no NVIDIA driver (libnvidia-ml.so.1 not found)。下面是主机内存。\n" +
		"主机内存已用 2.00 GiB，共 8.00 GiB（可用 6.00 GiB）\n" +
		"训练 #5（进程 77）：内存 300.00 MiB，1 个进程"
	if got := GPUTable(i18n.Zh, none); got != want {
		t.Errorf("zh got:\n%s\nwant:\n%s", got, want)
	}
}

func TestGPUNotesOfSlurmRuns(t *testing.T) {
	runs := []trainer.Status{
		{Run: &trainer.Run{ID: 1, Job: "local"}},
		{Run: &trainer.Run{ID: 2, Job: "big", Runner: "slurm", SlurmJobID: "42", Node: "gpu01"}},
		{Run: &trainer.Run{ID: 3, Job: "big2", Runner: "slurm", SlurmJobID: "43"}},
		{Run: &trainer.Run{ID: 4, Job: "big3", Runner: "slurm", SlurmJobID: "44", Node: "gpu02"}},
	}
	maxRSS := func(_ context.Context, id string) (int64, error) {
		if id == "42" {
			return 3 << 30, nil
		}
		return 0, errors.New("sstat: no steps")
	}
	got := SlurmGPUNotes(context.Background(), i18n.ZhEn, runs, maxRSS)
	for _, want := range []string{
		"run #2 (big) is Slurm job 42 on gpu01: its GPUs are that node's, not in the figures above; MaxRSS (sstat) 3.00 GiB",
		"run #3 (big2) is Slurm job 43, not running yet",
		"run #4 (big3) is Slurm job 44 on gpu02: its GPUs are that node's, not in the figures above; sstat cannot tell its memory (sstat: no steps)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("notes lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "run #1") {
		t.Errorf("a local run has a note:\n%s", got)
	}
	if got := SlurmGPUNotes(context.Background(), i18n.ZhEn, runs[:1], maxRSS); got != "" {
		t.Errorf("no Slurm run: %q, want no note", got)
	}
}
