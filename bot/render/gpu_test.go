package render

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/trainbot/trainbot/gpu"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/logparse"
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
	want := "[0] H100 80GB HBM3 · 40.00/80.00 GiB · 350/700 W\n" +
		"  run #3: 10.00 GiB\n" +
		"host memory 16.00 GiB used of 64.00 GiB (48.00 GiB available)\n" +
		"run #3 (pid 40): GPU 10.00 GiB on GPU 0 · host 1.00 GiB in 0 processes"
	if got := GPUTable(i18n.ZhEn, s, nil); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	none := gpu.Snapshot{Reason: "no NVIDIA driver (libnvidia-ml.so.1 not found)", Host: gpu.Host{MemTotal: 8 * gb, MemAvailable: 6 * gb},
		Runs: []gpu.RunUsage{{RunID: 5, PID: 77, HostBytes: i64(300 << 20), Processes: 1}}}
	want = "No NVIDIA GPU: no NVIDIA driver (libnvidia-ml.so.1 not found). Memory below is host memory.\n" +
		"host memory 2.00 GiB used of 8.00 GiB (6.00 GiB available)\n" +
		"run #5 (pid 77): host 300.00 MiB in 1 process"
	if got := GPUTable(i18n.ZhEn, none, nil); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	want = "没有 NVIDIA 显卡：no NVIDIA driver (libnvidia-ml.so.1 not found)。下面是主机内存。\n" +
		"主机内存已用 2.00 GiB，共 8.00 GiB（可用 6.00 GiB）\n" +
		"训练 #5（进程 77）：内存 300.00 MiB，1 个进程"
	if got := GPUTable(i18n.Zh, none, nil); got != want {
		t.Errorf("zh got:\n%s\nwant:\n%s", got, want)
	}
}

// sharedHost is a shared server as 显卡 sees it: run #3 on GPU 0 with two
// processes, bob's notebook at 0 % on GPU 1 for 3 hours beside a small
// process of carol's whose user has no name, GPU 2 idle.
func sharedHost() gpu.Snapshot {
	at := time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)
	dev := func(i int, usedGiB float64, util, temp int) gpu.Device {
		return gpu.Device{Index: i, UUID: fmt.Sprintf("GPU-%d", i), Name: "NVIDIA A100-SXM4-40GB", MemTotal: 40 * gb,
			MemUsed: uint64(usedGiB * gb), Util: util, TempC: temp, PowerMilliW: 250_000, PowerLimitMilliW: 400_000}
	}
	return gpu.Snapshot{At: at, Available: true,
		Devices: []gpu.Device{dev(0, 30, 97, 64), dev(1, 12.5, 0, 35), dev(2, 0, 0, 31)},
		Processes: []gpu.Process{
			{PID: 41231, Device: 0, MemUsed: 28 * gb, RunID: 3, Name: "python", User: "alice", Since: at.Add(-time.Hour), Util: 90},
			{PID: 41290, Device: 0, MemUsed: 1 * gb, RunID: 3, Name: "python", User: "alice", Since: at.Add(-time.Hour), Util: 7},
			{PID: 777, Device: 1, MemUsed: 512 << 20, Name: "python", UID: 54321, User: "54321", Command: "python -c import torch", Since: at.Add(-5 * time.Minute), Util: 0},
			{PID: 5121, Device: 1, MemUsed: 12 * gb, Name: "python", UID: 1001, User: "bob", Util: 0, Since: at.Add(-3*time.Hour - 12*time.Minute),
				Command: "/home/bob/.conda/envs/llm/bin/python -m jupyter lab --no-browser --port 8890 --ServerApp.token=abcdef"},
		},
		Host: gpu.Host{MemTotal: 512 * gb, MemAvailable: 470 * gb},
		Runs: []gpu.RunUsage{{RunID: 3, PID: 41230, GPUBytes: i64(29 * gb), Devices: []int{0}, HostBytes: i64(11 * gb), Processes: 9}},
	}
}

// The holders of each GPU: runs with their job and starter, other
// processes with user, command, memory, utilisation and how long.
func TestGPUTableHolders(t *testing.T) {
	runs := map[int64]GPURun{3: {Job: "llama-ft", By: "alice"}}
	want := "[0] A100-SXM4-40GB · 30.00/40.00 GiB · 97% · 64°C · 250/400 W\n" +
		"  run #3 (llama-ft, started by alice): 29.00 GiB in 2 processes\n" +
		"[1] A100-SXM4-40GB · 12.50/40.00 GiB · 0% · 35°C · 250/400 W\n" +
		"  bob, pid 5121: /home/bob/.conda/envs/llm/bin/python -m jupyter lab --no-br… · 12.00 GiB · 0% · for 3h12m\n" +
		"  54321, pid 777: python -c import torch · 512.00 MiB · 0% · for 5m\n" +
		"[2] A100-SXM4-40GB · 0 B/40.00 GiB · 0% · 31°C · 250/400 W\n" +
		"host memory 42.00 GiB used of 512.00 GiB (470.00 GiB available)\n" +
		"run #3 (pid 41230): GPU 29.00 GiB on GPU 0 · host 11.00 GiB in 9 processes"
	if got := GPUTable(i18n.ZhEn, sharedHost(), runs); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	want = "[0] A100-SXM4-40GB · 30.00/40.00 GiB · 97% · 64°C · 250/400 W\n" +
		"  训练 #3（llama-ft，alice 启动）：29.00 GiB，2 个进程\n" +
		"[1] A100-SXM4-40GB · 12.50/40.00 GiB · 0% · 35°C · 250/400 W\n" +
		"  bob，进程 5121：/home/bob/.conda/envs/llm/bin/python -m jupyter lab --no-br… · 12.00 GiB · 0% · 已占用 3 小时 12 分\n" +
		"  54321，进程 777：python -c import torch · 512.00 MiB · 0% · 已占用 5 分钟\n" +
		"[2] A100-SXM4-40GB · 0 B/40.00 GiB · 0% · 31°C · 250/400 W\n" +
		"主机内存已用 42.00 GiB，共 512.00 GiB（可用 470.00 GiB）\n" +
		"训练 #3（进程 41230）：显存 29.00 GiB（GPU 0） · 内存 11.00 GiB，9 个进程"
	if got := GPUTable(i18n.Zh, sharedHost(), runs); got != want {
		t.Errorf("zh got:\n%s\nwant:\n%s", got, want)
	}
	// A run this trainbot knows nothing more of; a process nobody can read.
	s := sharedHost()
	s.Processes[2].User, s.Processes[2].Command, s.Processes[2].Name, s.Processes[2].Util, s.Processes[2].Since = "", "", "", -1, time.Time{}
	got := GPUTable(i18n.En, s, nil)
	for _, w := range []string{"  run #3: 29.00 GiB in 2 processes\n", "  ?, pid 777: ? · 512.00 MiB\n"} {
		if !strings.Contains(got, w) {
			t.Errorf("got:\n%s\nwant it to contain %q", got, w)
		}
	}
	// Every line fits a phone: at most ~100 runes.
	for line := range strings.Lines(GPUTable(i18n.ZhEn, sharedHost(), runs)) {
		if n := utf8.RuneCountInString(line); n > 110 {
			t.Errorf("%d runes: %q", n, line)
		}
	}
}

func TestGPUAlertIdleHeld(t *testing.T) {
	s := sharedHost()
	a := gpu.Alert{Kind: gpu.AlertIdleHeld, Device: 1, Sampled: s.Devices[1], Holder: s.Processes[3], Idle: 45 * time.Minute,
		Thresholds: gpu.Thresholds{IdleMemory: gb, IdleFor: 30 * time.Minute}}
	want := "💤 GPU 1 (NVIDIA A100-SXM4-40GB) has been at 0% for 45m while bob's process 5121 (/home/bob/.conda/envs/llm/bin/python -m jupyter lab --no-br…) holds 12.00 GiB on it " +
		"(idle_held: 1.00 GiB or more at 0% for 30m). If it is not in use, ask for it to be freed."
	if got := GPUAlert(i18n.ZhEn, a); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	a.Holder = s.Processes[0]
	a.RunID = 3
	want = "💤 GPU 1 (NVIDIA A100-SXM4-40GB) 利用率为 0% 已有 45 分钟，训练 #3 的进程 41231 却在上面占着 28.00 GiB（idle_held：0% 下占用 1.00 GiB 以上达 30 分钟）。如果没有在用，请让它释放。"
	if got := GPUAlert(i18n.Zh, a); got != want {
		t.Errorf("zh got  %q\nwant %q", got, want)
	}
}

func TestGPURefusal(t *testing.T) {
	s := sharedHost()
	runs := map[int64]GPURun{3: {Job: "llama-ft", By: "alice"}}
	av := gpu.NewAvailability(gpu.DefaultBusyMemory, gpu.DefaultBusyUtil)
	earlier := s
	earlier.At = s.At.Add(-40 * time.Second)
	av.Observe(earlier)
	av.Observe(s)
	_, err := gpu.Choose(s, av, gpu.Request{Count: 2, Memory: 20 * gb}, map[string]bool{"GPU-0": true}, time.Minute)
	want := "⏳ Not enough free GPUs for 2 GPUs with 20.00 GiB free each now (0 free):\n" +
		"GPU 0: taken by run #3 (llama-ft, started by alice)\n" +
		"GPU 1: bob's process 5121 (/home/bob/.conda/envs/llm/bin/python -m jupyter lab --no-br…) holds 12.00 GiB\n" +
		"GPU 2: free for 40s of the 1m it must be"
	if got := GPURefusal(i18n.ZhEn, err, runs); got != want {
		t.Errorf("got:\n%s\nwant:\n%s\n(err %v)", got, want, err)
	}
	want = "⏳ 现在的空闲显卡（0 块）不够 2 块显卡（每块空闲 20.00 GiB）：\n" +
		"显卡 0：被训练 #3（llama-ft，alice 启动）占用\n" +
		"显卡 1：bob 的进程 5121（/home/bob/.conda/envs/llm/bin/python -m jupyter lab --no-br…）占着 12.00 GiB\n" +
		"显卡 2：已空闲 40 秒，需要 1 分钟"
	if got := GPURefusal(i18n.Zh, err, runs); got != want {
		t.Errorf("zh got:\n%s\nwant:\n%s", got, want)
	}
	// Busy, too little memory, another trainbot's lock.
	s.Devices[2].Util = 50
	s.Devices[2].MemUsed = 30 * gb
	_, err = gpu.Choose(s, av, gpu.Request{Indices: []int{1, 2}, Memory: 20 * gb}, map[string]bool{"GPU-1": true}, 0)
	want = "⏳ Not enough free GPUs for GPUs 1,2 with 20.00 GiB free each now (0 free):\n" +
		"GPU 1: taken by another trainbot's run\n" +
		"GPU 2: busy at 50% (busy from 10%)"
	if got := GPURefusal(i18n.En, err, nil); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	s.Devices[2].Util = 0
	_, err = gpu.Choose(s, av, gpu.Request{Indices: []int{2}, Memory: 20 * gb}, nil, 0)
	if got, want := GPURefusal(i18n.En, err, nil), "GPU 2: 10.00 GiB free, 20.00 GiB needed"; !strings.HasSuffix(got, want) {
		t.Errorf("got %q, want it to end with %q", got, want)
	}

	for _, c := range []struct {
		req  gpu.Request
		snap gpu.Snapshot
		en   string
		zh   string
	}{
		{gpu.Request{Count: 1}, gpu.Snapshot{Reason: "no NVIDIA driver (libnvidia-ml.so.1 not found)"},
			"🚫 No GPUs for 1 GPU on this host: no NVIDIA driver (libnvidia-ml.so.1 not found).",
			"🚫 这台主机满足不了 1 块显卡：no NVIDIA driver (libnvidia-ml.so.1 not found)。"},
		{gpu.Request{Count: 6}, sharedHost(), "🚫 No GPUs for 6 GPUs: this host has only 3.", "🚫 满足不了 6 块显卡：这台主机只有 3 块。"},
		{gpu.Request{Indices: []int{3}}, sharedHost(), "🚫 No GPUs for GPU 3: this host has no GPU 3 (it has 3).", "🚫 满足不了 显卡 3：这台主机没有显卡 3（它有 3 块）。"},
		{gpu.Request{Count: 1, Memory: 48 * gb}, sharedHost(), "🚫 No GPUs for 1 GPU with 48.00 GiB free each: this host has 3 GPUs, 0 of them with that much memory.", ""},
		{gpu.Request{Indices: []int{0}, Memory: 48 * gb}, sharedHost(), "🚫 No GPUs for GPU 0 with 48.00 GiB free each: GPU 0 has less memory than that in all.", ""},
	} {
		_, err := gpu.Choose(c.snap, nil, c.req, nil, 0)
		if got := GPURefusal(i18n.En, err, nil); got != c.en {
			t.Errorf("%v: got %q, want %q", c.req, got, c.en)
		}
		if got := GPURefusal(i18n.Zh, err, nil); c.zh != "" && got != c.zh {
			t.Errorf("%v zh: got %q, want %q", c.req, got, c.zh)
		}
	}
	if got := GPURefusal(i18n.En, errors.New("other"), nil); got != "" {
		t.Errorf("another error: %q", got)
	}
}

// A run's GPUs show in its status, its line of 历史 and its start reply's
// words (GPUsText).
func TestRunGPUsText(t *testing.T) {
	gpus := []trainer.RunGPU{{Index: 0, UUID: "GPU-a", Name: "NVIDIA A100-SXM4-80GB"}, {Index: 3, UUID: "GPU-d", Name: "NVIDIA A100-SXM4-80GB"}}
	if got := GPUsText(gpus); got != "0, 3 (A100-SXM4-80GB)" {
		t.Errorf("GPUsText = %q", got)
	}
	mixed := []trainer.RunGPU{{Index: 0, Name: "NVIDIA A100"}, {Index: 1, Name: "NVIDIA H100"}}
	if got := GPUsText(mixed); got != "0 A100, 1 H100" {
		t.Errorf("mixed GPUsText = %q", got)
	}
	r := &trainer.Run{ID: 4, Job: "train", Outcome: trainer.OutcomeFinished, State: trainer.StateEnded, StartedAt: time.Unix(0, 0), EndedAt: time.Unix(60, 0), GPUs: gpus}
	if got := RunLine(i18n.Zh, r, nil, time.Unix(120, 0)); !strings.Contains(got, "显卡：0,3") {
		t.Errorf("RunLine = %q", got)
	}
	st := trainer.Status{Run: r, Progress: logparse.Progress{Epoch: math.NaN()}}
	if got := StatusText(i18n.En, st); !strings.Contains(got, "GPUs: 0, 3 (A100-SXM4-80GB)") {
		t.Errorf("StatusText = %q", got)
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

// Another host's section of 显卡: its table under its name, or since
// when it has not answered, in both languages; its alerts name it.
func TestHostGPUTable(t *testing.T) {
	now := time.Date(2026, 12, 1, 14, 10, 0, 0, time.UTC)
	answered := gpu.HostSample{Host: "gpu2", Snapshot: gpu.Snapshot{At: now.Add(-time.Second), Available: true,
		Devices: []gpu.Device{{Index: 1, Name: "NVIDIA H100 80GB HBM3", MemUsed: 40 << 30, MemTotal: 80 << 30, Util: 97, TempC: 66}}}}
	noNVML := gpu.HostSample{Host: "cpu1", Snapshot: gpu.Snapshot{At: now, Reason: "no NVIDIA driver (libnvidia-ml.so.1 not found)"}}
	down := gpu.HostSample{Host: "gpu3", Unreachable: errors.New("connection refused"), Since: time.Date(2026, 12, 1, 14, 3, 7, 0, time.UTC),
		Snapshot: gpu.Snapshot{At: time.Date(2026, 12, 1, 14, 3, 5, 0, time.UTC)}}
	for _, tc := range []struct {
		l    i18n.Lang
		h    gpu.HostSample
		want string
	}{
		{i18n.En, answered, "── gpu2 ──\n[1] H100 80GB HBM3 · 40.00/80.00 GiB · 97% · 66°C"},
		{i18n.Zh, answered, "── 主机 gpu2 ──\n[1] H100 80GB HBM3"},
		{i18n.En, noNVML, "── cpu1 ──\nNo NVIDIA GPU: no NVIDIA driver (libnvidia-ml.so.1 not found)."},
		{i18n.En, down, "gpu3: unreachable since 14:03:07 (connection refused); last answer 14:03:05"},
		{i18n.Zh, down, "gpu3：自 14:03:07 起连不上（connection refused）；上次应答 14:03:05"},
		{i18n.En, gpu.HostSample{Host: "gpu4"}, "gpu4: no answer yet"},
		{i18n.En, gpu.HostSample{Host: "gpu5", Unreachable: errors.New("x"), Since: now.Add(-48 * time.Hour)}, "gpu5: unreachable since 11-29 14:10 (x)"},
	} {
		if got := HostGPUTable(tc.l, tc.h, now); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s %s:\ngot  %q\nwant %q…", tc.l, tc.h.Host, got, tc.want)
		}
	}
	a := gpu.Alert{Kind: gpu.AlertTemperature, Host: "gpu2", Device: 1, Sampled: gpu.Device{Index: 1, Name: "NVIDIA H100", TempC: 91}, Thresholds: gpu.Thresholds{TempC: 85}}
	if got := GPUAlert(i18n.En, a); !strings.Contains(got, "gpu2 GPU 1 (NVIDIA H100) at 91°C") {
		t.Errorf("alert = %q, want it to name the host", got)
	}
}
