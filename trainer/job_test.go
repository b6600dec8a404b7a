package trainer

import (
	"errors"
	"math"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/trainbot/trainbot/trainer/slurm"
)

func fp(v float64) *float64 { return &v }

func testJob() *Job {
	j := &Job{
		Name:    "train",
		Command: []string{"python3", "train.py", "--bs", "{batch_size}", "--opt={optimizer}"},
		Env:     map[string]string{"CUDA_VISIBLE_DEVICES": "0"},
		Params: map[string]ParamSpec{
			"batch_size": {Type: ParamInt, Default: "64", HasDefault: true, Min: fp(1), Max: fp(4096)},
			"lr":         {Type: ParamFloat, Default: "0.001", HasDefault: true, Min: fp(0), Max: fp(1), Env: "LR"},
			"optimizer":  {Type: ParamString, Default: "adam", HasDefault: true, Choices: []string{"adam", "sgd"}},
			"amp":        {Type: ParamBool, Default: "false", HasDefault: true},
		},
	}
	if err := j.Normalize(); err != nil {
		panic(err)
	}
	return j
}

func TestResolveParams(t *testing.T) {
	j := testJob()
	cases := []struct {
		name    string
		given   map[string]string
		want    map[string]string
		errWant []string // substrings; empty means no error
	}{
		{"defaults", nil, map[string]string{"batch_size": "64", "lr": "0.001", "optimizer": "adam", "amp": "false"}, nil},
		{"given", map[string]string{"batch_size": "32", "lr": "3e-4", "optimizer": "sgd", "amp": "yes"},
			map[string]string{"batch_size": "32", "lr": "3e-4", "optimizer": "sgd", "amp": "true"}, nil},
		{"unknown key", map[string]string{"bs": "32"}, nil, []string{`bs: "32" is an unknown parameter`, "amp, batch_size, lr, optimizer"}},
		{"not an int", map[string]string{"batch_size": "1;rm"}, nil, []string{`batch_size: "1;rm" is not an integer`}},
		{"int out of range", map[string]string{"batch_size": "99999999999999999999"}, nil, []string{"out of range for a 64-bit integer"}},
		{"float out of range", map[string]string{"lr": "1e400"}, nil, []string{`lr: "1e400" is out of range for a 64-bit float`}},
		{"float for int", map[string]string{"batch_size": "3.5"}, nil, []string{"not an integer"}},
		{"out of range", map[string]string{"batch_size": "0"}, nil, []string{"below the minimum 1"}},
		{"above max", map[string]string{"lr": "2"}, nil, []string{"above the maximum 1"}},
		{"nan", map[string]string{"lr": "NaN"}, nil, []string{"not a number"}},
		{"not a choice", map[string]string{"optimizer": "adamw"}, nil, []string{"not one of adam, sgd"}},
		{"bad bool", map[string]string{"amp": "maybe"}, nil, []string{"not true or false"}},
		{"every error", map[string]string{"batch_size": "x", "lr": "y"}, nil, []string{"batch_size", "lr"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := j.ResolveParams(c.given)
			if len(c.errWant) == 0 {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				for k, v := range c.want {
					if got[k] != v {
						t.Errorf("%s = %q, want %q", k, got[k], v)
					}
				}
				return
			}
			if err == nil || !errors.Is(err, ErrBadParam) {
				t.Fatalf("got %v, want a bad parameter error", err)
			}
			for _, s := range c.errWant {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
		})
	}
}

func TestArgvNeverUsesAShell(t *testing.T) {
	j := testJob()
	params, err := j.ResolveParams(map[string]string{"batch_size": "32"})
	if err != nil {
		t.Fatal(err)
	}
	params["optimizer"] = "a b; c" // as if a string parameter had it
	argv, env := j.Argv(params)
	want := []string{"python3", "train.py", "--bs", "32", "--opt=a b; c"}
	if !slices.Equal(argv, want) {
		t.Fatalf("argv %q, want %q", argv, want)
	}
	for _, e := range []string{"TRAINBOT_PARAM_BATCH_SIZE=32", "TRAINBOT_PARAM_LR=0.001", "LR=0.001", "CUDA_VISIBLE_DEVICES=0"} {
		if !slices.Contains(env, e) {
			t.Errorf("env %q lacks %q", env, e)
		}
	}
}

// "{{" and "}}" are literal braces: sh -c 'echo ${HOME}', f-strings.
func TestLiteralBraces(t *testing.T) {
	j := &Job{Name: "a", Command: []string{"sh", "-c", "echo ${{HOME}} {{x}} {n} }}{{", `print(f"{{n}}={n}")`},
		Params: map[string]ParamSpec{"n": {Type: ParamInt, Default: "3", HasDefault: true}}}
	if err := j.Normalize(); err != nil {
		t.Fatal(err)
	}
	argv, _ := j.Argv(map[string]string{"n": "7"})
	want := []string{"sh", "-c", "echo ${HOME} {x} 7 }{", `print(f"{n}=7")`}
	if !slices.Equal(argv, want) {
		t.Errorf("argv %q, want %q", argv, want)
	}
}

func TestNormalizeRejectsBadJobs(t *testing.T) {
	cases := []struct {
		job  Job
		want string
	}{
		{Job{Name: "a b", Command: []string{"x"}}, "name"},
		{Job{Name: "a"}, "command"},
		{Job{Name: "a", Command: []string{"x", "{nope}"}}, "{nope}"},
		{Job{Name: "nan", Command: []string{"x"}}, `name "nan" reads as a number`},
		{Job{Name: "inf", Command: []string{"x"}}, `reads as a number`},
		{Job{Name: "42", Command: []string{"x"}}, `reads as a number`},
		{Job{Name: "a", Command: []string{"x"}, Params: map[string]ParamSpec{"p": {Type: "complex"}}}, "params.p.type"},
		{Job{Name: "a", Command: []string{"x"}, Params: map[string]ParamSpec{"p": {Type: ParamInt, Min: fp(5), Max: fp(1)}}}, "min 5 is above max 1"},
		{Job{Name: "a", Command: []string{"x"}, Params: map[string]ParamSpec{"p": {Type: ParamInt, Default: "x", HasDefault: true}}}, "params.p.default"},
	}
	for _, c := range cases {
		err := c.job.Normalize()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an error about %q", c.job, err, c.want)
		}
	}
}

func TestDetectOOM(t *testing.T) {
	cases := []struct {
		line  string
		kind  string
		tried int64
		gpu   int
		free  int64
		total int64
	}{
		{"RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 7.79 GiB total capacity; 5.12 GiB already allocated; 1.23 GiB free; 5.30 GiB reserved in total by PyTorch)",
			"cuda", 2 << 30, 0, 1320702443, 8364448808},
		{"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 3 has a total capacity of 79.15 GiB of which 12.75 MiB is free. Including non-PyTorch memory, this process has 79.13 GiB memory in use. Of the allocated memory 78.20 GiB is allocated by PyTorch, and 412.50 MiB is reserved by PyTorch but unallocated.",
			"cuda", 20 << 20, 3, 13369344, 84986665369},
		{"RuntimeError: [enforce fail at alloc_cpu.cpp:83] . DefaultCPUAllocator: can't allocate memory: you tried to allocate 80000000000 bytes. Error code 12 (Cannot allocate memory)",
			"host", 80000000000, -1, -1, 0},
		{"tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with shape[1024,1024,256] and type float on /job:localhost/replica:0/task:0/device:GPU:1 by allocator GPU_0_bfc",
			"tensorflow", 1024 * 1024 * 256 * 4, 1, -1, 0},
		{"jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 17179869184 bytes.",
			"jax", 17179869184, -1, -1, 0},
		{"RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`", "cublas", 0, -1, -1, 0},
		{"RuntimeError: cuDNN error: CUDNN_STATUS_ALLOC_FAILED", "cudnn", 0, -1, -1, 0},
		{"MemoryError: Unable to allocate 7.45 GiB for an array with shape (1000000000,) and data type float64", "host", 7999376588, -1, -1, 0},
	}
	for _, c := range cases {
		o, ok := DetectOOM(c.line)
		if !ok {
			t.Errorf("not detected: %s", c.line)
			continue
		}
		if o.Kind != c.kind || o.TriedBytes != c.tried || o.GPU != c.gpu || o.FreeBytes != c.free || o.TotalBytes != c.total {
			t.Errorf("%s:\ngot kind %s tried %d gpu %d free %d total %d\nwant kind %s tried %d gpu %d free %d total %d",
				c.line, o.Kind, o.TriedBytes, o.GPU, o.FreeBytes, o.TotalBytes, c.kind, c.tried, c.gpu, c.free, c.total)
		}
	}
	for _, line := range []string{
		"Epoch [1/10], Step [100/600], Loss: 0.2345",
		"memory usage: 1.2 GiB",
		"allocating buffers for the data loader",
		"the model uses gradient checkpointing to save memory",
		"print('MemoryError handling test passed')",
	} {
		if o, ok := DetectOOM(line); ok {
			t.Errorf("false positive %q: %+v", line, o)
		}
	}
}

func TestOOMSummaryAndFragmentation(t *testing.T) {
	o, _ := DetectOOM("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.15 GiB of which 12.75 MiB is free. 412.50 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
	s := o.Summary()
	for _, want := range []string{"CUDA out of memory on GPU 0", "tried to allocate 20.00 MiB (20971520 bytes)", "12.75 MiB free of 79.15 GiB", "412.50 MiB reserved"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary %q lacks %q", s, want)
		}
	}
	if !o.Fragmented() {
		t.Error("reserved-but-unallocated memory should count as fragmentation")
	}
}

func TestClassify(t *testing.T) {
	nan := &NaNStreak{Metric: "loss", Value: math.NaN(), Count: 3, Step: 5} // "loss is NaN for 3 points in a row (step 5)"
	oom, _ := DetectOOM("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 7.79 GiB total capacity; 1.23 GiB free)")
	cases := []struct {
		name string
		e    ending
		want Outcome
		in   string
	}{
		{"exit 0", ending{exitCode: 0}, OutcomeFinished, "exit status 0"},
		{"exit 1", ending{exitCode: 1, stderrTail: []string{"a", "ValueError: x"}}, OutcomeFailed, "ValueError: x"},
		{"segfault", ending{exitCode: -1, signal: syscall.SIGSEGV}, OutcomeFailed, "SIGSEGV"},
		{"stopped", ending{exitCode: 130, stopBy: "ann", stopReason: OutcomeStopped}, OutcomeStopped, "stopped by ann (exit status 130)"},
		{"stopped though oom", ending{exitCode: 1, stopBy: "ann", stopReason: OutcomeStopped, oom: oom}, OutcomeStopped, "ann"},
		{"oom, then stopped", ending{exitCode: 1, stopBy: "ann", stopReason: OutcomeStopped, oom: oom, oomBeforeStop: true}, OutcomeOOM, "GiB; then stopped by ann"},
		{"oom", ending{exitCode: 1, oom: oom, peakMemText: "peak GPU memory 7.00 GiB"}, OutcomeOOM, "peak GPU memory 7.00 GiB"},
		{"oom killer", ending{exitCode: -1, signal: syscall.SIGKILL, oomKills: 1}, OutcomeOOM, "OOM killer"},
		{"killed, oom count unknown", ending{exitCode: -1, signal: syscall.SIGKILL, oomKills: -1}, OutcomeOOM, "most likely the kernel's OOM killer"},
		{"killed by someone else", ending{exitCode: -1, signal: syscall.SIGKILL, oomKills: 0}, OutcomeFailed, "counts no OOM kill"},
		{"our kill", ending{exitCode: -1, signal: syscall.SIGKILL, sentKill: true, stopBy: "x", stopReason: OutcomeStopped}, OutcomeStopped, "SIGKILL"},
		{"nan", ending{exitCode: 0, nan: nan}, OutcomeNaN, "loss is NaN"},
		{"nan recovered", ending{exitCode: 0, nan: nan, nanRecovered: true}, OutcomeFinished, "exit status 0; loss is NaN for 3 points in a row (step 5), then it recovered"},
		{"nan recovered, then failed", ending{exitCode: 2, nan: nan, nanRecovered: true}, OutcomeFailed, "exit status 2; loss is NaN for 3 points in a row (step 5), then it recovered"},
		{"nan stopped", ending{exitCode: 130, stopBy: "trainbot (NaN loss)", stopReason: OutcomeNaN, nan: nan}, OutcomeNaN, "stopped by trainbot"},
	}
	for _, c := range cases {
		got, facts := classify(c.e)
		detail := facts.English()
		if got != c.want || !strings.Contains(detail, c.in) {
			t.Errorf("%s: got %s %q, want %s containing %q", c.name, got, detail, c.want, c.in)
		}
	}
}

func TestRingReplacesCarriageReturnLines(t *testing.T) {
	r := newRing(3)
	r.put([]byte("a"), false)
	r.put([]byte("bar 1"), false)
	r.put([]byte("bar 2"), true)
	r.put([]byte("b"), false)
	r.put([]byte("c"), false)
	r.publish()
	got := r.last(10)
	want := []string{"bar 2", "b", "c"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got := r.last(1); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("last(1) = %q", got)
	}
}

func TestTensorBoardDir(t *testing.T) {
	j := &Job{Name: "j", Command: []string{"python3"}, Dir: "/srv/exp", TensorBoard: "runs/{run_name}-{run_id}",
		Params: map[string]ParamSpec{"run_name": {Type: ParamString, Default: "a", HasDefault: true}}}
	if err := j.Normalize(); err != nil {
		t.Fatal(err)
	}
	r := &Run{ID: 12, Params: map[string]string{"run_name": "bert"}}
	if got := j.TensorBoardDir(r); got != "/srv/exp/runs/bert-12" {
		t.Errorf("TensorBoardDir = %q", got)
	}
	j.TensorBoard = "/abs/{run_name}"
	if got := j.TensorBoardDir(r); got != "/abs/bert" {
		t.Errorf("an absolute directory: %q", got)
	}
	j.TensorBoard = ""
	if got := j.TensorBoardDir(r); got != "" {
		t.Errorf("no tensorboard: %q", got)
	}
	bad := &Job{Name: "j", Command: []string{"python3"}, TensorBoard: "runs/{nope}"}
	if err := bad.Normalize(); err == nil || !strings.Contains(err.Error(), `tensorboard: "runs/{nope}" refers to {nope}`) {
		t.Errorf("an undeclared parameter: %v", err)
	}
}

// A Slurm job's GPU request is sbatch's --gpus; exact GPUs cannot be
// asked of Slurm.
func TestSlurmGPURequest(t *testing.T) {
	j := &Job{Name: "big", Runner: RunnerSlurm, GPUs: GPURequest{Count: 2}, Slurm: slurm.Options{Partition: "gpu", GPUs: ""}}
	if o := slurmOptions(j.Slurm, j.gpuRequest(nil)); o.GPUs != "2" || o.Partition != "gpu" {
		t.Errorf("the job's gpus: %+v", o)
	}
	if o := slurmOptions(j.Slurm, j.gpuRequest(map[string]string{"gpus": "4"})); o.GPUs != "4" {
		t.Errorf("gpus=4: %+v", o)
	}
	if o := slurmOptions(slurm.Options{GPUs: "a100:2"}, GPURequest{}); o.GPUs != "a100:2" {
		t.Errorf("slurm.gpus alone: %+v", o)
	}
	if o := slurmOptions(slurm.Options{GPUs: "a100:2"}, GPURequest{Count: 1}); o.GPUs != "a100:1" {
		t.Errorf("gpus=1 over slurm.gpus a100:2: %+v, want the type kept", o)
	}
}

// A parameter's description writes an int's bounds as ints (it wrote
// "steps: int 1..1e+07") and a float's as the shortest exact number.
func TestDescribeBounds(t *testing.T) {
	lo, hi, tiny, big := 1.0, 1e7, 1e-6, 10.0
	for _, c := range []struct {
		p    ParamSpec
		want string
	}{
		{ParamSpec{Type: ParamInt, Min: &lo, Max: &hi, Default: "1500", HasDefault: true}, "int 1..10000000, default 1500"},
		{ParamSpec{Type: ParamFloat, Min: &tiny, Max: &big, Default: "0.01", HasDefault: true}, "float 1e-06..10, default 0.01"},
		{ParamSpec{Type: ParamInt, Max: &hi}, "int ≤ 10000000, required"},
	} {
		if got := c.p.Describe(); got != c.want {
			t.Errorf("Describe() = %q, want %q", got, c.want)
		}
	}
}

// An OOM keeps what PyTorch's allocator said and numpy's request, a
// traceback's innermost line of the user's code is where it failed, and
// a request half of which would not fit is known as such.
func TestOOMDetailsAndFrame(t *testing.T) {
	o, ok := DetectOOM("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.65 GiB of which 1.25 GiB is free. Including non-PyTorch memory, this process has 22.38 GiB memory in use. Of the allocated memory 20.12 GiB is allocated by PyTorch, and 1.75 GiB is reserved by PyTorch but unallocated.")
	if !ok || o.Allocated != parseSize("20.12", "GiB") || o.Reserved != parseSize("1.75", "GiB") {
		t.Fatalf("PyTorch 2: %+v", o)
	}
	if s := o.Summary(); !strings.Contains(s, "20.12 GiB already allocated by PyTorch") {
		t.Errorf("Summary %q drops the allocator's numbers", s)
	}
	o, _ = DetectOOM("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 23.65 GiB total capacity; 20.12 GiB already allocated; 1.25 GiB free; 21.87 GiB reserved in total by PyTorch)")
	if o == nil || o.Allocated != parseSize("20.12", "GiB") {
		t.Errorf("PyTorch 1: %+v", o)
	}
	o, _ = DetectOOM("numpy.core._exceptions._ArrayMemoryError: Unable to allocate 512. GiB for an array with shape (68719476736,) and data type float64")
	if o == nil || o.Kind != "host" || o.TriedBytes != 512<<30 {
		t.Fatalf("numpy: %+v", o)
	}
	o.TotalBytes = 23 << 30
	if !o.HalvingCannotHelp() {
		t.Error("512 GiB on a 23 GiB host: halving should be known not to help")
	}
	o.TriedBytes = 30 << 30
	if o.HalvingCannotHelp() {
		t.Error("30 GiB on a 23 GiB host: half fits")
	}
	for line, want := range map[string]string{
		`  File "/home/me/proj/train.py", line 28, in <module>`:                                                "train.py:28",
		`  File "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", line 1532, in _wrapped_call_impl`: "",
		`  File "/home/me/venv/lib/python3.11/site-packages/numpy/core/numeric.py", line 204, in ones`:         "",
		`  File "/usr/lib/python3.11/threading.py", line 982, in run`:                                          "",
		`  File "<frozen runpy>", line 198, in _run_module_as_main`:                                            "",
	} {
		f, user, ok := tracebackFrame(line)
		if !ok || (user && f != want) || (!user && want != "") {
			t.Errorf("tracebackFrame(%q) = %q, user %v, %v; want %q", line, f, user, ok, want)
		}
	}
}
