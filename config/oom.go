package config

import "fmt"

// OnOOMConfig is a job's on_oom: after the run runs out of memory, start it
// again with the Halve parameter halved, at most Retry times in a row:
//
//	on_oom = { retry = 2, halve = "batch_size" }
//
// When the job's past runs give a memory fit of that parameter, the retry
// jumps straight to the largest value predicted to fit instead of halving;
// fit = false keeps plain halving.
type OnOOMConfig struct {
	Retry int    `toml:"retry"`
	Halve string `toml:"halve"`
	Fit   *bool  `toml:"fit"`
}

// OnFailureConfig is a job's on_failure: resume after an end that is not
// the script's fault (docs/runs-that-come-back.md).
type OnFailureConfig struct {
	Retry             int      `toml:"retry"`
	When              []string `toml:"when"`
	Backoff           Duration `toml:"backoff"`
	RequireCheckpoint bool     `toml:"require_checkpoint"`
}

// validateOnOOM checks that job i's on_oom names an int parameter of the
// job. (How many retries trainbot allows is the supervisor's to say:
// cmd/trainbot checks Retry.)
func (c *Config) validateOnOOM(i int) Errors {
	o := c.Jobs[i].OnOOM
	if o == nil {
		return nil
	}
	key := fmt.Sprintf("jobs[%d].on_oom", i)
	var errs Errors
	pc, ok := c.Jobs[i].Params[o.Halve]
	switch {
	case o.Halve == "":
		errs = append(errs, c.ErrorAt(key+".halve", "name the int parameter to halve, e.g. halve = \"batch_size\""))
	case !ok:
		errs = append(errs, c.ErrorAt(key+".halve", "%q is not a parameter of this job: declare it under [jobs.params.%s] with type = \"int\"", o.Halve, o.Halve))
	case pc.Type != "int":
		errs = append(errs, c.ErrorAt(key+".halve", "parameter %s is %q; only an int parameter can be halved", o.Halve, pc.Type))
	}
	return errs
}
