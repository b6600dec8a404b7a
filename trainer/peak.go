package trainer

import (
	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/internal/units"
)

// peakRank orders the ways of measuring: a better one replaces a worse
// one's figure.
func peakRank(how string) int {
	switch how {
	case history.PeakCgroup:
		return 3
	case history.PeakTreeSum:
		return 2
	case history.PeakMain:
		return 1
	}
	return 0
}

// PeakHostNote says in a few words how a peak was measured, for charts
// and texts: "VmHWM, exact".
func PeakHostNote(how string) string {
	switch how {
	case history.PeakMain:
		return "VmHWM of its process, exact"
	case history.PeakTreeSum:
		return "sum of its processes' VmHWM, an upper bound"
	case history.PeakCgroup:
		return "cgroup memory.peak"
	}
	return "largest sample"
}

// raisePeakHost records a high-water mark of the run's host memory
// measured in a way (how): the figure of the best way measured so far is
// kept, raised to the largest value that way gave. Samples (history.PeakSampled)
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
	if r.PeakHostMem != nil && peakRank(how) > cur && how != history.PeakCgroup && bytes < *r.PeakHostMem {
		bytes = *r.PeakHostMem // a sum of high-water marks is at least any sample
	}
	v := bytes
	r.PeakHostMem, r.PeakHostHow = &v, how
}

// raisePeakSampled records a sample of the tree's resident memory: it
// raises the peak until a high-water mark is known.
func (r *Run) raisePeakSampled(bytes int64) {
	if r.PeakHostHow == history.PeakSampled && (r.PeakHostMem == nil || bytes > *r.PeakHostMem) {
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
	if r.PeakHostHow != history.PeakSampled {
		s += " (" + PeakHostNote(r.PeakHostHow) + ")"
	}
	return s
}
