package trainer

import "github.com/trainbot/trainbot/internal/units"

// How a run's peak host memory was measured (Run.PeakHostHow). The
// periodic samples of the process tree's resident memory miss short peaks
// (the backward pass); the kernel's high-water marks do not.
const (
	// PeakSampled: the largest of the periodic samples of the tree's
	// resident memory (runs of trainbot before high-water marks, Slurm runs).
	PeakSampled = ""
	// PeakMain: the high-water mark of the run's one process (VmHWM while
	// it ran, wait4's ru_maxrss when it ended): exact.
	PeakMain = "main"
	// PeakTreeSum: the sum of the high-water marks of the run's processes,
	// each reached at its own time: an upper bound of the tree's peak.
	PeakTreeSum = "tree-sum"
	// PeakCgroup: memory.peak of the run's own cgroup: exact for the tree
	// (page cache included).
	PeakCgroup = "cgroup"
)

// peakRank orders the ways of measuring: a better one replaces a worse
// one's figure.
func peakRank(how string) int {
	switch how {
	case PeakCgroup:
		return 3
	case PeakTreeSum:
		return 2
	case PeakMain:
		return 1
	}
	return 0
}

// PeakHostNote says in a few words how a peak was measured, for charts
// and texts: "VmHWM, exact".
func PeakHostNote(how string) string {
	switch how {
	case PeakMain:
		return "VmHWM of its process, exact"
	case PeakTreeSum:
		return "sum of its processes' VmHWM, an upper bound"
	case PeakCgroup:
		return "cgroup memory.peak"
	}
	return "largest sample"
}

// raisePeakHost records a high-water mark of the run's host memory
// measured in a way (how): the figure of the best way measured so far is
// kept, raised to the largest value that way gave. Samples (PeakSampled)
// never replace a high-water mark; a high-water mark replaces samples,
// which can only be lower.
func (r *Run) raisePeakHost(bytes int64, how string) {
	if bytes <= 0 {
		return
	}
	cur := peakRank(r.PeakHostHow)
	if r.PeakHostMem != nil && peakRank(how) < cur {
		return
	}
	if r.PeakHostMem != nil && peakRank(how) == cur && bytes <= *r.PeakHostMem {
		return
	}
	if r.PeakHostMem != nil && peakRank(how) > cur && how != PeakCgroup && bytes < *r.PeakHostMem {
		bytes = *r.PeakHostMem // a sum of high-water marks is at least any sample
	}
	v := bytes
	r.PeakHostMem, r.PeakHostHow = &v, how
}

// raisePeakSampled records a sample of the tree's resident memory: it
// raises the peak until a high-water mark is known.
func (r *Run) raisePeakSampled(bytes int64) {
	if r.PeakHostHow == PeakSampled && (r.PeakHostMem == nil || bytes > *r.PeakHostMem) {
		v := bytes
		r.PeakHostMem = &v
	}
}

// peakHostText is "peak host memory 454 MiB (VmHWM of its process, exact)".
func peakHostText(r *Run) string {
	if r.PeakHostMem == nil {
		return ""
	}
	s := "peak host memory " + units.Bytes(*r.PeakHostMem)
	if r.PeakHostHow != PeakSampled {
		s += " (" + PeakHostNote(r.PeakHostHow) + ")"
	}
	return s
}
