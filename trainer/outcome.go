package trainer

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/trainbot/trainbot/internal/procfs"
	"github.com/trainbot/trainbot/internal/units"
	"golang.org/x/sys/unix"
)

// OOM describes an out-of-memory failure found in a run's output.
type OOM struct {
	Kind       string // "cuda", "host", "tensorflow", "jax", "cublas", "cudnn", "oom-killer"
	Line       string // the line it was found in
	TriedBytes int64  // what the allocation asked for, 0 when unknown
	GPU        int    // device index, -1 when unknown
	TotalBytes int64  // device capacity, 0 when unknown
	FreeBytes  int64  // free at the time, -1 when unknown
	Reserved   int64  // PyTorch: reserved but unallocated, 0 when unknown
	// Allocated is what PyTorch's allocator held when it failed ("20.12
	// GiB already allocated", "Of the allocated memory 20.12 GiB is
	// allocated by PyTorch"), 0 when unknown.
	Allocated int64
	// Frame is where the script failed: the innermost frame of the
	// traceback before the error that is the user's code, not a library's
	// ("train.py:28"); "" when none was printed.
	Frame string
}

// Summary is a one-line human description, e.g.
// "CUDA out of memory on GPU 0: tried to allocate 2.00 GiB; 1.23 GiB free of 7.79 GiB".
func (o *OOM) Summary() string {
	var b strings.Builder
	switch o.Kind {
	case "cuda":
		b.WriteString("CUDA out of memory")
	case "host":
		b.WriteString("host memory exhausted")
	case "tensorflow":
		b.WriteString("TensorFlow out of memory")
	case "jax":
		b.WriteString("XLA out of memory")
	case "cublas", "cudnn":
		b.WriteString(o.Kind + " could not allocate memory")
	case "oom-killer":
		b.WriteString("killed by the kernel's OOM killer")
	default:
		b.WriteString("out of memory")
	}
	if o.GPU >= 0 {
		fmt.Fprintf(&b, " on GPU %d", o.GPU)
	}
	var parts []string
	if o.TriedBytes > 0 {
		parts = append(parts, "tried to allocate "+units.Bytes(o.TriedBytes)+fmt.Sprintf(" (%d bytes)", o.TriedBytes))
	}
	switch {
	case o.FreeBytes >= 0 && o.TotalBytes > 0:
		parts = append(parts, units.Bytes(o.FreeBytes)+" free of "+units.Bytes(o.TotalBytes))
	case o.FreeBytes >= 0:
		parts = append(parts, units.Bytes(o.FreeBytes)+" free")
	case o.TotalBytes > 0:
		parts = append(parts, units.Bytes(o.TotalBytes)+" total")
	}
	if o.Allocated > 0 {
		parts = append(parts, units.Bytes(o.Allocated)+" already allocated by PyTorch")
	}
	if o.Reserved > 0 {
		parts = append(parts, units.Bytes(o.Reserved)+" reserved by PyTorch but unallocated")
	}
	if len(parts) > 0 {
		b.WriteString(": " + strings.Join(parts, "; "))
	}
	if o.Frame != "" {
		b.WriteString(" (at " + o.Frame + ")")
	}
	return b.String()
}

// HalvingCannotHelp reports whether the failed allocation is so far past
// the memory there is that half of it would still not fit: a 512 GiB
// request on a 23 GiB host is a tensor sized by mistake, not a batch a
// little too large.
func (o *OOM) HalvingCannotHelp() bool {
	return o != nil && o.TriedBytes > 0 && o.TotalBytes > 0 && o.TriedBytes/2 > o.TotalBytes
}

// tracebackFrame reads a line of a Python traceback, `  File
// "/home/me/train.py", line 28, in <module>`: the file and line, and
// whether it is the user's code (not a library's: site-packages,
// dist-packages, the standard library, <frozen …>).
func tracebackFrame(line string) (frame string, user, ok bool) {
	m := pyFrame.FindStringSubmatch(line)
	if m == nil {
		return "", false, false
	}
	file := m[1]
	user = !strings.Contains(file, "site-packages") && !strings.Contains(file, "dist-packages") &&
		!strings.HasPrefix(file, "<") && !pyStdlib.MatchString(file)
	short := file
	if i := strings.LastIndexByte(file, '/'); i >= 0 {
		short = file[i+1:]
	}
	return short + ":" + m[2], user, true
}

var (
	pyFrame  = regexp.MustCompile(`^\s*File "([^"]+)", line ([0-9]+)`)
	pyStdlib = regexp.MustCompile(`/lib(?:64)?/python[0-9.]*/`)
)

// Fragmented reports whether PyTorch said that memory is reserved but
// unallocated, the case where expandable segments help.
func (o *OOM) Fragmented() bool {
	return o.Reserved > 0 || strings.Contains(o.Line, "expandable_segments")
}

var (
	sizeRE = `([0-9]+(?:\.[0-9]*)?)\s*([KMGTP]i?B|bytes|B)` // numpy writes "512. GiB"

	// PyTorch 1.x: "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 7.79 GiB total capacity;
	// 5.12 GiB already allocated; 1.23 GiB free; 5.30 GiB reserved in total by PyTorch)"
	// PyTorch 2.x: "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of
	// 79.15 GiB of which 12.75 MiB is free. ... 412.50 MiB is reserved by PyTorch but unallocated."
	torchTried    = regexp.MustCompile(`(?i)tried to allocate ` + sizeRE)
	torchGPU      = regexp.MustCompile(`\bGPU\s+([0-9]+)\b`)
	torchTotal1   = regexp.MustCompile(sizeRE + ` total capacity`)
	torchFree1    = regexp.MustCompile(sizeRE + ` free`)
	torchTotal2   = regexp.MustCompile(`total capacity of ` + sizeRE)
	torchFree2    = regexp.MustCompile(`of which ` + sizeRE + ` is free`)
	torchReserved = regexp.MustCompile(sizeRE + ` is reserved by PyTorch but unallocated`)
	torchAlloc1   = regexp.MustCompile(sizeRE + ` already allocated`)
	torchAlloc2   = regexp.MustCompile(`allocated memory ` + sizeRE + ` is allocated by PyTorch`)
	// numpy: "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 512. GiB for an array with
	// shape (…) and data type float64"
	numpyTried = regexp.MustCompile(`Unable to allocate ` + sizeRE)
	// "DefaultCPUAllocator: can't allocate memory: you tried to allocate 80000000000 bytes."
	cpuTried = regexp.MustCompile(`(?i)you tried to allocate ([0-9]+) bytes`)
	// TensorFlow: "OOM when allocating tensor with shape[1024,1024,1024] and type float on
	// /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc"
	tfShape  = regexp.MustCompile(`OOM when allocating tensor with shape\s*\[([0-9, ]*)\] and type (\w+)`)
	tfDevice = regexp.MustCompile(`device:GPU:([0-9]+)`)
	// JAX: "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 17179869184 bytes."
	jaxTried = regexp.MustCompile(`(?i)(?:trying to allocate|allocating) ([0-9]+) bytes`)
	jaxSize  = regexp.MustCompile(`(?i)(?:trying to allocate|allocating) ` + sizeRE)
)

// DetectOOM reports whether a line is an out-of-memory error, and what it says.
func DetectOOM(line string) (*OOM, bool) {
	if len(line) > 8192 {
		line = line[:8192]
	}
	if !mayBeOOM(line) {
		return nil, false
	}
	lower := strings.ToLower(line)
	o := &OOM{GPU: -1, FreeBytes: -1, Line: strings.TrimSpace(line)}
	switch {
	case strings.Contains(lower, "cuda out of memory") || strings.Contains(lower, "torch.outofmemoryerror") ||
		strings.Contains(lower, "torch.cuda.outofmemoryerror") || strings.Contains(line, "OutOfMemoryError: CUDA"):
		o.Kind = "cuda"
		o.TriedBytes = firstSize(torchTried, line)
		if m := torchGPU.FindStringSubmatch(line); m != nil {
			o.GPU, _ = strconv.Atoi(m[1])
		}
		if v := firstSize(torchTotal2, line); v > 0 {
			o.TotalBytes = v
		} else {
			o.TotalBytes = firstSize(torchTotal1, line)
		}
		if m := torchFree2.FindStringSubmatch(line); m != nil {
			o.FreeBytes = parseSize(m[1], m[2])
		} else if m := torchFree1.FindStringSubmatch(line); m != nil {
			o.FreeBytes = parseSize(m[1], m[2])
		}
		o.Reserved = firstSize(torchReserved, line)
		if v := firstSize(torchAlloc2, line); v > 0 {
			o.Allocated = v
		} else {
			o.Allocated = firstSize(torchAlloc1, line)
		}
	case strings.Contains(line, "DefaultCPUAllocator") || strings.Contains(lower, "can't allocate memory") ||
		strings.Contains(line, "std::bad_alloc") || strings.Contains(line, "MemoryError"):
		if strings.Contains(line, "MemoryError") && !strings.HasPrefix(strings.TrimSpace(line), "MemoryError") &&
			!strings.Contains(line, "DefaultCPUAllocator") && !strings.Contains(line, "numpy.core._exceptions") {
			return nil, false
		}
		o.Kind = "host"
		if m := cpuTried.FindStringSubmatch(line); m != nil {
			o.TriedBytes, _ = strconv.ParseInt(m[1], 10, 64)
		} else {
			o.TriedBytes = firstSize(numpyTried, line)
		}
	case strings.Contains(line, "ResourceExhaustedError") || strings.Contains(line, "OOM when allocating tensor"):
		o.Kind = "tensorflow"
		if m := tfShape.FindStringSubmatch(line); m != nil {
			o.TriedBytes = tensorBytes(m[1], m[2])
		}
		if m := tfDevice.FindStringSubmatch(line); m != nil {
			o.GPU, _ = strconv.Atoi(m[1])
		}
	case strings.Contains(line, "RESOURCE_EXHAUSTED") && strings.Contains(lower, "out of memory"):
		o.Kind = "jax"
		if m := jaxTried.FindStringSubmatch(line); m != nil {
			o.TriedBytes, _ = strconv.ParseInt(m[1], 10, 64)
		} else {
			o.TriedBytes = firstSize(jaxSize, line)
		}
	case strings.Contains(line, "CUBLAS_STATUS_ALLOC_FAILED"):
		o.Kind = "cublas"
	case strings.Contains(line, "CUDNN_STATUS_ALLOC_FAILED") || strings.Contains(line, "CUDNN_STATUS_NOT_ENOUGH_WORKSPACE"):
		o.Kind = "cudnn"
	case strings.Contains(lower, "cudaerrormemoryallocation") || strings.Contains(lower, "cuda error: out of memory"):
		o.Kind = "cuda"
	default:
		return nil, false
	}
	return o, true
}

// mayBeOOM is the cheap test that runs on every output line: whether it
// has one of the words every out-of-memory message has ("memory", "OOM",
// "alloc", "RESOURCE_EXHAUSTED", "ResourceExhausted", in their usual
// cases). Each of them has an 'o' or an 'O' at a known place: the line is
// searched for those, eight bytes at a time, and the words are tried only
// around them.
func mayBeOOM(line string) bool {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
		lower = 0x2020202020202020 // 'O'|0x20 == 'o', and only 'O' and 'o' give 'o'
		o8    = 0x6f6f6f6f6f6f6f6f
	)
	i := 0
	for ; i+8 <= len(line); i += 8 {
		w := line[i : i+8]
		x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
			uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		x = (x | lower) ^ o8
		if (x-ones)&^x&highs == 0 {
			continue // no zero byte in x: no 'o' nor 'O' in w
		}
		for j := i; j < i+8; j++ {
			if line[j]|0x20 == 'o' && oomWordAt(line, j) {
				return true
			}
		}
	}
	for j := i; j < len(line); j++ {
		if line[j]|0x20 == 'o' && oomWordAt(line, j) {
			return true
		}
	}
	return false
}

// oomWordAt reports whether one of mayBeOOM's words has its 'o' or 'O' at
// line[j].
func oomWordAt(line string, j int) bool {
	if line[j] == 'o' {
		return hasAt(line, j-2, "emory") || hasAt(line, j-3, "alloc") || hasAt(line, j-3, "ResourceExhausted")
	}
	return hasAt(line, j, "OOM") || hasAt(line, j-2, "EMORY") || hasAt(line, j-3, "ALLOC") || hasAt(line, j-3, "RESOURCE_EXHAUSTED")
}

// hasAt reports whether s has word at index i (which may be negative).
func hasAt(s string, i int, word string) bool {
	return i >= 0 && strings.HasPrefix(s[i:], word)
}

func firstSize(re *regexp.Regexp, s string) int64 {
	m := re.FindStringSubmatch(s)
	if m == nil {
		return 0
	}
	return parseSize(m[1], m[2])
}

func parseSize(num, unit string) int64 {
	v, _ := units.ParseBytes(num, unit)
	return int64(v)
}

func tensorBytes(shape, dtype string) int64 {
	n := int64(1)
	for _, d := range strings.Split(shape, ",") {
		d = strings.TrimSpace(d)
		if d == "" {
			continue
		}
		v, err := strconv.ParseInt(d, 10, 64)
		if err != nil || v < 0 {
			return 0
		}
		n *= v
		if n > 1<<50 {
			return 0
		}
	}
	size := int64(4)
	switch dtype {
	case "double", "int64", "uint64", "complex64":
		size = 8
	case "half", "bfloat16", "int16", "uint16":
		size = 2
	case "int8", "uint8", "bool":
		size = 1
	case "complex128":
		size = 16
	}
	return n * size
}

// ending is what the supervisor knows when a run's process has ended.
type ending struct {
	exitCode      int            // -1 when killed by a signal or never started
	signal        syscall.Signal // the signal that ended it, 0 if none
	startErr      error          // the command could not be started
	stopBy        string         // who asked to stop it, "" if nobody
	stopReason    Outcome        // OutcomeStopped, or OutcomeNaN when stopped for NaN
	oomBeforeStop bool           // it had run out of memory when the stop was asked
	sentKill      bool           // trainbot sent SIGKILL
	killedNow     bool           // ... at shutdown, without waiting for the grace periods
	oom           *OOM           // an OOM line seen in the output
	nan           *NaNStreak     // the NaN alert's streak, nil if none
	nanRecovered  bool           // no loss is NaN any more: the NaN did not last
	oomKills      int64          // increase of the cgroup's oom_kill count during the run, -1 unknown
	stderrTail    []string
	peakMemText   string // "peak 14.2 GiB GPU" when known
}

// classify decides the outcome of an ended run and the facts of its end.
func classify(e ending) (Outcome, *EndFacts) {
	f := &EndFacts{StderrTail: lastLinesList(e.stderrTail, 5), NaN: e.nan}
	code := e.exitCode
	switch {
	case e.startErr != nil:
		f.Why, f.StartError, f.StderrTail, f.NaN = WhyNoStart, e.startErr.Error(), nil, nil
		return OutcomeFailed, f
	case e.stopBy != "" && e.stopReason == OutcomeNaN:
		f.Why, f.StoppedBy, f.StderrTail = WhyStoppedNaN, e.stopBy, nil
		return OutcomeNaN, f
	case e.stopBy != "" && !e.oomBeforeStop:
		f.Why, f.StoppedBy, f.StderrTail, f.NaN = WhyStopped, e.stopBy, nil, nil
		switch {
		case e.killedNow && e.signal == syscall.SIGKILL:
			f.StopHow, f.Signal = StopKilledNow, int(e.signal)
		case e.sentKill && e.signal == syscall.SIGKILL:
			f.StopHow, f.Signal = StopKilledGrace, int(e.signal)
		case e.signal != 0:
			f.StopHow, f.Signal = StopSignal, int(e.signal)
		default:
			f.StopHow, f.ExitCode = StopExit, &code
		}
		return OutcomeStopped, f
	case e.oom != nil:
		f.Why, f.OOM, f.Peak, f.ThenStoppedBy, f.StderrTail, f.NaN = WhyOOM, e.oom, e.peakMemText, e.stopBy, nil, nil
		return OutcomeOOM, f
	case e.signal == syscall.SIGKILL && !e.sentKill && e.oomKills == 0:
		// The cgroup counts no OOM kill during the run: a person or another
		// program killed it.
		f.Why, f.Signal, f.NaN = WhyStrayKill, int(e.signal), nil
		return OutcomeFailed, f
	case e.signal == syscall.SIGKILL && !e.sentKill:
		f.Why, f.Signal, f.OOMKills, f.Peak, f.StderrTail, f.NaN = WhyOOMKill, int(e.signal), e.oomKills, e.peakMemText, nil, nil
		if e.oomKills > 0 {
			f.OOM = &OOM{Kind: "oom-killer", GPU: -1, FreeBytes: -1}
		}
		return OutcomeOOM, f
	case e.nan != nil && !e.nanRecovered:
		f.Why, f.StderrTail = WhyNaN, nil
		return OutcomeNaN, f
	}
	// A NaN the loss recovered from did not decide the end; it is told.
	if !e.nanRecovered {
		f.NaN = nil
	}
	switch {
	case e.exitCode == 0 && e.signal == 0:
		f.Why, f.ExitCode, f.StderrTail = WhyExit, &code, nil
		return OutcomeFinished, f
	case e.signal != 0:
		f.Why, f.Signal = WhySignal, int(e.signal)
		return OutcomeFailed, f
	default:
		f.Why, f.ExitCode = WhyExit, &code
		return OutcomeFailed, f
	}
}

// lastLinesList is the last n non-blank lines; nil when there are none.
func lastLinesList(lines []string, n int) []string {
	var keep []string
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			keep = append(keep, l)
		}
	}
	if len(keep) > n {
		keep = keep[len(keep)-n:]
	}
	return keep
}

func lastLines(lines []string, n int) string { return strings.Join(lastLinesList(lines, n), "\n") }

// SignalName is a signal's name, "SIGSEGV" ("signal 77" for one without).
func SignalName(n int) string {
	if name := unix.SignalName(syscall.Signal(n)); name != "" {
		return name
	}
	return fmt.Sprintf("signal %d", n)
}

// SignalWords is a signal as the supervisor's English names the one that
// ended a run: "SIGSEGV (segmentation fault)", "signal 77 (signal 77)".
func SignalWords(n int) string { return signalName(syscall.Signal(n)) }

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGSEGV:
		return "SIGSEGV (segmentation fault)"
	case syscall.SIGABRT:
		return "SIGABRT (abort)"
	case syscall.SIGBUS:
		return "SIGBUS"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	}
	return fmt.Sprintf("signal %d (%s)", int(s), s.String())
}

// hostMemTotal is this host's MemTotal (/proc/meminfo), 0 when unknown:
// the memory a host OOM ran out of, for the advice to tell whether halving
// the batch could help.
func hostMemTotal() int64 {
	m, err := procfs.Meminfo()
	if err != nil {
		return 0
	}
	return int64(m.Total)
}
