package history

// How a run's peak host memory was measured (trainer.Run.PeakHostHow, as
// the store keeps it and gpu's monitor reports it). The periodic samples of
// the process tree's resident memory miss short peaks (the backward pass);
// the kernel's high-water marks do not.
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
