package config

import (
	"fmt"

	"github.com/trainbot/trainbot/trainer"
)

// OnOOMConfig is a job's on_oom: after the run runs out of memory, start it
// again with the Halve parameter halved, at most Retry times in a row:
//
//	on_oom = { retry = 2, halve = "batch_size" }
type OnOOMConfig struct {
	Retry int    `toml:"retry"`
	Halve string `toml:"halve"`
}

// onOOM converts and checks job i's on_oom into j.
func (c *Config) onOOM(i int, j *trainer.Job) Errors {
	o := c.Jobs[i].OnOOM
	if o == nil {
		return nil
	}
	key := fmt.Sprintf("jobs[%d].on_oom", i)
	var errs Errors
	if o.Retry < 1 || o.Retry > trainer.MaxOOMRetries {
		errs = append(errs, c.errorAt(key+".retry", "want 1..%d retries, got %d", trainer.MaxOOMRetries, o.Retry))
	}
	pc, ok := c.Jobs[i].Params[o.Halve]
	switch {
	case o.Halve == "":
		errs = append(errs, c.errorAt(key+".halve", "name the int parameter to halve, e.g. halve = \"batch_size\""))
	case !ok:
		errs = append(errs, c.errorAt(key+".halve", "%q is not a parameter of this job: declare it under [jobs.params.%s] with type = \"int\"", o.Halve, o.Halve))
	case pc.Type != "int":
		errs = append(errs, c.errorAt(key+".halve", "parameter %s is %q; only an int parameter can be halved", o.Halve, pc.Type))
	}
	j.OnOOM = &trainer.OOMRetry{Retry: o.Retry, Halve: o.Halve}
	return errs
}
