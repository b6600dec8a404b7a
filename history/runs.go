package history

// Point is a stored metric value.
type Point struct {
	Step  int64
	Epoch float64 // NaN when unknown
	Value float64 // NaN when the script printed NaN
	T     int64   // unix milliseconds when trainbot read it
}

// RunFilter selects runs.
type RunFilter struct {
	Job   string // "" for all jobs
	Limit int    // 0 for all
}

// Extremes are the lowest and highest finite values of one metric of a
// run, and a step at which each was reached.
type Extremes struct {
	Min, Max         float64
	MinStep, MaxStep int64
}

// OutcomeCount is how many runs of a job ended with an outcome.
type OutcomeCount struct {
	Job string
	// Outcome is the trainer.Outcome as stored ("finished", "oom", …): a
	// string, so this package needs nothing of trainer.
	Outcome string
	Runs    int64
}
