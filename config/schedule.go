package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/trainbot/trainbot/schedule"
)

// ScheduleConfig is one [[schedules]] entry: work done on a cron schedule.
type ScheduleConfig struct {
	// Name names the schedule in messages and logs.
	Name string `toml:"name"`
	// Spec is a 5-field cron spec ("0 9 * * 1-5"), a descriptor ("@daily",
	// "@every 6h"), either one after "CRON_TZ=Asia/Shanghai ".
	Spec string `toml:"spec"`
	// Action is "report" (status and charts of the active run to the
	// subscribed chats and the push channels with progress) or "start"
	// (start Job with Params; refused with a message if a run is active).
	Action string         `toml:"action"`
	Job    string         `toml:"job"`
	Params map[string]any `toml:"params"`
}

// Schedule is a [[schedules]] entry checked.
type Schedule struct {
	Name, Spec, Action string
	Job                string
	Params             map[string]string
}

// Schedule actions.
const (
	ActionReport = "report"
	ActionStart  = "start"
)

// validateSchedules checks [[schedules]]; an error names the schedule:
// "schedules[1] (nightly): spec "61 * * * *": …".
func (c *Config) validateSchedules() Errors {
	var errs Errors
	seen := map[string]int{}
	for i := range c.Schedules {
		_, serrs := c.schedule(i)
		errs = append(errs, serrs...)
		if n := c.Schedules[i].Name; n != "" {
			if prev, dup := seen[n]; dup {
				errs = append(errs, c.entryError(fmt.Sprintf("schedules[%d].name", i), fmt.Sprintf("schedules[%d] (%s)", i, n), "name %q is already used by schedules[%d]", n, prev))
			}
			seen[n] = i
		}
	}
	return errs
}

func (c *Config) schedule(i int) (Schedule, Errors) {
	sc := c.Schedules[i]
	key, shown := entryKey("schedules", i, sc.Name)
	var errs Errors
	add := func(k, format string, args ...any) {
		errs = append(errs, c.entryError(key+k, shown, format, args...))
	}
	s := Schedule{Name: sc.Name, Spec: sc.Spec, Action: sc.Action, Job: sc.Job, Params: map[string]string{}}
	if sc.Name == "" {
		add("", "a schedule needs a name, e.g. name = \"nightly\"")
	}
	if _, err := schedule.Parse(sc.Spec); err != nil {
		reason := err.Error()
		var se *schedule.SpecError
		if errors.As(err, &se) {
			reason = se.Reason
		}
		add(".spec", "spec %q: %s", sc.Spec, reason)
	}
	for k, v := range sc.Params {
		s.Params[k] = scalarText(v)
	}
	switch sc.Action {
	case ActionReport:
		if sc.Job != "" || len(sc.Params) > 0 {
			add(".job", "job and params apply to action = \"start\"; a report is about the active run")
		}
	case ActionStart:
		errs = append(errs, c.checkScheduledStart(key, shown, &s)...)
	default:
		add(".action", "action: want \"report\" or \"start\", got %q", sc.Action)
	}
	return s, errs
}

// checkScheduledStart checks the job and the parameters of a start.
func (c *Config) checkScheduledStart(key, shown string, s *Schedule) Errors {
	var errs Errors
	idx := -1
	for j, jc := range c.Jobs {
		if jc.Name == s.Job || (s.Job == "" && len(c.Jobs) == 1) {
			idx = j
		}
	}
	if idx < 0 {
		var names []string
		for _, jc := range c.Jobs {
			names = append(names, jc.Name)
		}
		msg := "job: there is no [[jobs]] entry to start"
		switch {
		case s.Job != "" && len(names) > 0:
			msg = fmt.Sprintf("job: no job named %q; the jobs are %s", s.Job, strings.Join(names, ", "))
		case len(names) > 1:
			msg = "job: name the job to start: " + strings.Join(names, ", ")
		}
		return append(errs, c.entryError(key+".job", shown, "%s", msg))
	}
	job, jerrs := c.job(idx)
	if len(jerrs) > 0 {
		return errs // reported at the job
	}
	s.Job = job.Name
	if _, err := job.ResolveParams(s.Params); err != nil {
		for _, e := range unwrapAll(err) {
			errs = append(errs, c.entryError(key+".params", shown, "params: %v", e))
		}
	}
	return errs
}

// ScheduleEntries returns the [[schedules]] entries. Call after Validate.
func (c *Config) ScheduleEntries() ([]Schedule, error) {
	var out []Schedule
	for i := range c.Schedules {
		s, errs := c.schedule(i)
		if len(errs) > 0 {
			return nil, errs
		}
		out = append(out, s)
	}
	return out, nil
}
