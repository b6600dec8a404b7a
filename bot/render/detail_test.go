package render

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/trainer"
)

// A Chinese chat words the end's facts; English and zh+en show the record;
// a run without facts (recorded before them, or decided by its owner)
// shows its detail as recorded.
func TestEndDetailWordsTheFacts(t *testing.T) {
	one, code := 1, 0
	nan := &trainer.NaNStreak{Metric: "loss", Value: math.NaN(), Count: 3, Step: 7}
	cuda := &trainer.OOM{Kind: "cuda", GPU: 0, TriedBytes: 2 << 30, FreeBytes: 1 << 30, TotalBytes: 8 << 30}
	gpuPeak, hostPeak := int64(6<<30), int64(3<<30)
	peaks := &trainer.Run{PeakGPUMem: &gpuPeak, PeakHostMem: &hostPeak, PeakHostHow: history.PeakMain}
	until := time.Date(2026, 12, 1, 9, 30, 0, 0, time.FixedZone("CST", 8*3600))
	for _, c := range []struct {
		f    trainer.EndFacts
		run  *trainer.Run // its peaks, when the facts tell them
		want string
	}{
		{trainer.EndFacts{Why: trainer.WhyExit, ExitCode: &one, StderrTail: []string{"ValueError: exit status 2"}}, nil, "退出码 1；stderr 最后几行：\nValueError: exit status 2"},
		{trainer.EndFacts{Why: trainer.WhySignal, Signal: 11}, nil, "被 SIGSEGV 终止"},
		{trainer.EndFacts{Why: trainer.WhyExit, ExitCode: &code}, nil, "退出码 0"},
		{trainer.EndFacts{Why: trainer.WhyStopped, StoppedBy: "ann", StopHow: trainer.StopSignal, Signal: 15}, nil, "由 ann 停止（被 SIGTERM 结束）"},
		{trainer.EndFacts{Why: trainer.WhyStopped, StoppedBy: "trainbot shutdown", StopHow: trainer.StopKilledNow, Signal: 9}, nil, "由 trainbot shutdown 停止（用 SIGKILL 终止：trainbot 正在关闭，不能再等）"},
		{trainer.EndFacts{Why: trainer.WhyNaN, NaN: nan}, nil, "loss 为 NaN，已连续 3 个点（第 7 步）"},
		{trainer.EndFacts{Why: trainer.WhyStoppedNaN, NaN: nan, StoppedBy: "trainbot (NaN loss)"}, nil, "loss 为 NaN，已连续 3 个点（第 7 步）；已被 trainbot 停止"},
		{trainer.EndFacts{Why: trainer.WhyStoppedNaN, StoppedBy: "alice"}, nil, "loss 为 NaN，由 alice 停止"},
		{trainer.EndFacts{Why: trainer.WhyExit, ExitCode: &code, NaN: nan}, nil, "退出码 0；loss 为 NaN，已连续 3 个点（第 7 步），之后恢复了"},
		{trainer.EndFacts{Why: trainer.WhyNoStart, StartError: `exec: "python9": executable file not found in $PATH`}, nil, `无法启动：exec: "python9": executable file not found in $PATH`},
		{trainer.EndFacts{Why: trainer.WhyNoStart, StartError: "its directory /d/runs/1 already exists: another trainbot with another database uses this data directory? (the next run takes a higher id)", RunDirTaken: "/d/runs/1"}, nil,
			"无法启动：它的目录 /d/runs/1 已经存在：是否有另一个使用别的数据库的 trainbot 也在用这个数据目录？（下一个训练会用更大的编号）"},
		{trainer.EndFacts{Why: trainer.WhyStrayKill, Signal: 9, StderrTail: []string{"bye"}}, nil, "被一个不是 trainbot 发出的 SIGKILL 终止；内存 cgroup 在训练期间没有记录 OOM kill，所以是别的东西杀死了它；stderr 最后几行：\nbye"},
		{trainer.EndFacts{Why: trainer.WhyStopped, StoppedBy: "ann", StopHow: trainer.StopKilledGrace, Signal: 9}, nil, "由 ann 停止（宽限期过后用 SIGKILL 终止）"},
		{trainer.EndFacts{Why: trainer.WhyStopped, StoppedBy: "ann", StopHow: trainer.StopExit, ExitCode: &one, EndNotes: trainer.EndNotes{Survivors: 1}}, nil, "由 ann 停止（退出码 1）；训练有 1 个进程在 SIGKILL 之后仍然存活"},
		{trainer.EndFacts{Why: trainer.WhyOOM, OOM: cuda, Peak: "peak GPU memory 6.00 GiB, peak host memory 3.00 GiB (VmHWM of its process, exact)", ThenStoppedBy: "ann"}, peaks,
			"CUDA 显存不足（GPU 0）：尝试分配 2.00 GiB（2147483648 字节）；剩余 1.00 GiB，共 8.00 GiB；显存峰值 6.00 GiB，内存峰值 3.00 GiB（其进程的 VmHWM，精确值）；之后由 ann 停止"},
		{trainer.EndFacts{Why: trainer.WhyOOMKill, Signal: 9, OOMKills: 2, OOM: &trainer.OOM{Kind: "oom-killer", GPU: -1, FreeBytes: -1}}, nil,
			"被内核的 OOM killer 杀掉（内存 cgroup 在训练期间记录了 2 次 OOM kill）"},
		{trainer.EndFacts{Why: trainer.WhyOOMKill, Signal: 9, OOMKills: -1, Peak: "peak host memory 3.00 GiB (VmHWM of its process, exact)"}, &trainer.Run{PeakHostMem: &hostPeak, PeakHostHow: history.PeakMain},
			"被一个不是 trainbot 发出的 SIGKILL 终止：很可能是内核的 OOM killer（主机内存；这里读不到 cgroup 的 OOM 计数）；内存峰值 3.00 GiB（其进程的 VmHWM，精确值）"},
		// The remarks.
		{trainer.EndFacts{Why: trainer.WhyExit, ExitCode: &code, EndNotes: trainer.EndNotes{Dropped: &trainer.Dropped{Bytes: 2048}, LogCut: &trainer.LogCut{MaxLogBytes: 1 << 20, From: 1024, To: 4096},
			Survivors: 2, UnseenRules: []trainer.UnseenRule{{Rule: "val_acc below 0.5", Metric: "val_acc"}, {Rule: "steps_per_s below 1", Metric: trainer.MetricStepsPerSec}, {Rule: "gpu_util below 5", Metric: trainer.MetricGPUUtil}},
			MetricNamesMax: 256}}, nil,
			"退出码 0；有 2.00 KiB 的输出没有写入日志（磁盘跟不上）；日志超过了 max_log_bytes（1.00 MiB）：释放了 3.00 KiB 较早的输出（保留开头的 1.00 KiB）；训练有 2 个进程在 SIGKILL 之后仍然存活；" +
				`告警规则 "val_acc below 0.5" 监视 val_acc，但训练从未输出它；告警规则 "steps_per_s below 1" 监视 steps_per_s，但它无法测量（没有输出过步数）；告警规则 "gpu_util below 5" 监视 gpu_util，但 NVML 从未报告训练进程的这个值；` +
				"输出中的指标名超过了 256 个：更多指标名的点没有记录（日志里有 max_log_bytes 没有释放的那部分）"},
		{trainer.EndFacts{Why: trainer.WhyExit, ExitCode: &code, EndNotes: trainer.EndNotes{Dropped: &trainer.Dropped{Bytes: 10, Reason: "no space left on device"}, MetricNamesMax: 256}}, nil,
			"退出码 0；有 10 B 的输出没有写入日志（no space left on device）；输出中的指标名超过了 256 个：更多指标名的点没有记录（日志里有它们）"},
		// Slurm's states.
		{trainer.EndFacts{Why: trainer.WhySlurm, Signal: 15, Slurm: &trainer.SlurmEnd{JobID: "3", State: "TIMEOUT", TimeLimit: "00:01:00", Node: "vm"}}, nil, "达到时间限制 00:01:00（Slurm 状态 TIMEOUT）"},
		{trainer.EndFacts{Why: trainer.WhySlurm, Signal: 11, Slurm: &trainer.SlurmEnd{JobID: "3", State: "FAILED", Node: "vm"}}, nil, "被信号 11 终止（Slurm 状态 FAILED，节点 vm）"},
		{trainer.EndFacts{Why: trainer.WhySlurm, Slurm: &trainer.SlurmEnd{JobID: "3", State: "NODE_FAIL", Node: "gpu[01-02]"}}, nil, "节点故障（Slurm 状态 NODE_FAIL，节点 gpu[01-02]）"},
		{trainer.EndFacts{Why: trainer.WhySlurm, Slurm: &trainer.SlurmEnd{JobID: "3", State: "OUT_OF_MEMORY", Node: "vm"}}, nil, "内存不足（Slurm 状态 OUT_OF_MEMORY，节点 vm）"},
		{trainer.EndFacts{Why: trainer.WhySlurm, Slurm: &trainer.SlurmEnd{JobID: "3", State: "PREEMPTED", Node: "vm"}}, nil, "被抢占（Slurm 状态 PREEMPTED，节点 vm）"},
		{trainer.EndFacts{Why: trainer.WhySlurm, Slurm: &trainer.SlurmEnd{JobID: "3", State: "CANCELLED", Node: "vm"}}, nil, "在 trainbot 之外被取消"},
		{trainer.EndFacts{Why: trainer.WhyStopped, StoppedBy: "alice", StopHow: trainer.StopSlurmCancel, Slurm: &trainer.SlurmEnd{JobID: "3", State: "CANCELLED"}}, nil, "由 alice 停止（Slurm 作业已取消）"},
		// Interrupted.
		{trainer.EndFacts{Why: trainer.WhyInterrupted, Interrupted: trainer.InterruptSupervisorGone, SupervisorPID: 7,
			Orphans: &trainer.Orphans{PGID: 8, Until: until, StoppedBy: "ann", Signal: 15}}, nil,
			"训练的监管进程（7）已退出，没有记录训练是怎么结束的；它的进程（进程组 8）在无人监管下一直运行到 2026-12-01 09:30:00，由 ann 停止（SIGTERM）"},
		{trainer.EndFacts{Why: trainer.WhyInterrupted, Interrupted: trainer.InterruptSupervisorGone, SupervisorPID: 7}, nil, "训练的监管进程（7）已退出，没有记录训练是怎么结束的"},
		{trainer.EndFacts{Why: trainer.WhyInterrupted, Interrupted: trainer.InterruptTrainbotGone, SupervisorPID: 41, LogWritten: &until, AlivePGID: 42}, nil,
			"训练进行时 trainbot（pid 41）停止了；在它下次启动时发现；日志最后写入于 2026-12-01 09:30:00；它的进程组 42 仍在运行，无人监管"},
		{trainer.EndFacts{Why: trainer.WhyInterrupted, Interrupted: trainer.InterruptSlurmForgot, Slurm: &trainer.SlurmEnd{JobID: "12", Error: "slurm: unknown job 12"}}, nil,
			"Slurm 已不知道作业 12（slurm: unknown job 12）：它在没有 trainbot 跟踪时结束，早于集群的 MinJobAge，而集群没有作业记账；无从得知它是怎么结束的"},
		{trainer.EndFacts{Why: trainer.WhyInterrupted, Interrupted: trainer.InterruptWatchEnded}, nil, "跟踪已结束"},
		// Watched runs.
		{trainer.EndFacts{Why: trainer.WhyUnwatched, StoppedBy: "ann", PID: 99, GoesOn: true}, nil, "不再跟踪：由 ann 停止；进程（pid 99）继续运行"},
		{trainer.EndFacts{Why: trainer.WhyStopped, StoppedBy: "bob", StopHow: trainer.StopSignalled, PID: 99}, nil, "由 bob 停止（已向跟踪的进程 99 发送信号）"},
		{trainer.EndFacts{Why: trainer.WhyWatchExit, PID: 99}, nil, "进程（pid 99）已退出；退出码未知（它不是 trainbot 的子进程）"},
		{trainer.EndFacts{Why: trainer.WhyWatchExit, PID: 99, ErrorLine: "ValueError: bad shape"}, nil, "进程（pid 99）已退出；日志以一个错误结尾：ValueError: bad shape"},
		{trainer.EndFacts{Why: trainer.WhyWatchExit, PID: 99, OOM: cuda}, nil, "进程（pid 99）已退出；日志最后几行说：CUDA 显存不足（GPU 0）：尝试分配 2.00 GiB（2147483648 字节）；剩余 1.00 GiB，共 8.00 GiB"},
	} {
		f := c.f
		r := &trainer.Run{}
		if c.run != nil {
			r = c.run.Clone()
		}
		r.Detail, r.End = f.English(), &f
		name := string(f.Why) + "/" + f.Interrupted + f.StopHow
		if got := EndDetail(i18n.Zh, r); got != c.want {
			t.Errorf("%s: got %q, want %q", name, got, c.want)
		}
		for _, l := range []i18n.Lang{i18n.En, i18n.ZhEn} {
			if got := EndDetail(l, r); got != r.Detail {
				t.Errorf("%s in %s: got %q, want the record %q", name, l, got, r.Detail)
			}
		}
		// The messages' English is the supervisor's: one wording of each fact.
		if got, ok := endWords(i18n.En, r, &f); !ok || got != r.Detail {
			t.Errorf("%s: the English messages say %q, the supervisor %q", name, got, r.Detail)
		}
		head, _, _ := strings.Cut(EndDetail(i18n.Zh, r), "stderr")
		for _, en := range []string{"exit status", "killed by", "points in a row", "then it recovered", "stopped by", "could not start", "something else",
			"Slurm state", "supervisor", "unsupervised", "watched", "exited", "out of memory", "peak", "directory", "cancelled", "no longer",
			"were not written", "passed", "survived", "alert rule", "named more", "the disk"} {
			if strings.Contains(head, en) {
				t.Errorf("%s in Chinese: %q is left in %q", name, en, head)
			}
		}
	}
	// Notes recorded as English, before they were facts, stay so.
	legacy := trainer.EndFacts{Why: trainer.WhyStopped, StoppedBy: "ann", StopHow: trainer.StopExit, ExitCode: &one, Notes: []string{"3 B of output were not written"}}
	if got := EndDetail(i18n.Zh, &trainer.Run{Detail: legacy.English(), End: &legacy}); got != "由 ann 停止（退出码 1）；3 B of output were not written" {
		t.Errorf("earlier notes: got %q", got)
	}
	old := &trainer.Run{Detail: "exit status 3"}
	if got := EndDetail(i18n.Zh, old); got != "exit status 3" {
		t.Errorf("a run without facts: got %q, want its detail as recorded", got)
	}
	newer := &trainer.Run{Detail: "something a newer trainbot knows", End: &trainer.EndFacts{Why: "newer"}}
	if got := EndDetail(i18n.Zh, newer); got != newer.Detail {
		t.Errorf("facts of an unknown kind: got %q, want the detail as recorded", got)
	}
}

// A start refused because its directory was taken says so in the chat's
// language; any other start error is quoted as it is.
func TestStartFailure(t *testing.T) {
	taken := &trainer.StartError{Run: &trainer.Run{ID: 1, End: &trainer.EndFacts{Why: trainer.WhyNoStart, RunDirTaken: "/d/runs/1"}},
		Err: errors.New("its directory /d/runs/1 already exists: another trainbot with another database uses this data directory? (the next run takes a higher id)")}
	if got := StartFailure(i18n.Zh, taken); !strings.HasPrefix(got, "它的目录 /d/runs/1 已经存在") {
		t.Errorf("zh: %q", got)
	}
	if got := StartFailure(i18n.En, taken); got != taken.Err.Error() {
		t.Errorf("en: %q, want the error %q", got, taken.Err)
	}
	other := &trainer.StartError{Run: &trainer.Run{ID: 2, End: &trainer.EndFacts{Why: trainer.WhyNoStart, StartError: "sbatch: error: invalid partition"}}, Err: errors.New("sbatch: error: invalid partition")}
	if got := StartFailure(i18n.Zh, other); got != "sbatch: error: invalid partition" {
		t.Errorf("zh, another error: %q", got)
	}
}
