package config

import (
	"fmt"
	"sort"
	"strings"
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

// Schedule actions.
const (
	ActionReport = "report"
	ActionStart  = "start"
)

// ParamsText is the schedule's parameters as text.
func (s ScheduleConfig) ParamsText() map[string]string {
	out := map[string]string{}
	for k, v := range s.Params {
		out[k] = ScalarText(v)
	}
	return out
}

// StartJob is the job a "start" schedule starts: the named one, or the only
// job when none is named; -1 when there is no such job.
func (c *Config) StartJob(i int) int {
	s := c.Schedules[i]
	for j, jc := range c.Jobs {
		if jc.Name == s.Job || (s.Job == "" && len(c.Jobs) == 1) {
			return j
		}
	}
	return -1
}

// validateSchedules checks the shape of [[schedules]]; an error names the
// schedule: "schedules[1] (nightly): …". The spec and the parameters are
// checked where the schedule is made (cmd/trainbot).
func (c *Config) validateSchedules() Errors {
	var errs Errors
	seen := map[string]int{}
	for i, sc := range c.Schedules {
		add := func(sub, format string, args ...any) {
			errs = append(errs, c.EntryErrorAt("schedules", i, sc.Name, sub, format, args...))
		}
		if sc.Name == "" {
			add("", "a schedule needs a name, e.g. name = \"nightly\"")
		} else if prev, dup := seen[sc.Name]; dup {
			add(".name", "name %q is already used by schedules[%d]", sc.Name, prev)
		} else {
			seen[sc.Name] = i
		}
		switch sc.Action {
		case ActionReport:
			if sc.Job != "" || len(sc.Params) > 0 {
				add(".job", "job and params apply to action = \"start\"; a report is about the active run")
			}
		case ActionStart:
			if c.StartJob(i) < 0 {
				var names []string
				for _, jc := range c.Jobs {
					names = append(names, jc.Name)
				}
				sort.Strings(names)
				msg := "job: there is no [[jobs]] entry to start"
				switch {
				case sc.Job != "" && len(names) > 0:
					msg = fmt.Sprintf("job: no job named %q; the jobs are %s", sc.Job, strings.Join(names, ", "))
				case len(names) > 1:
					msg = "job: name the job to start: " + strings.Join(names, ", ")
				}
				add(".job", "%s", msg)
			}
		default:
			add(".action", "action: want \"report\" or \"start\", got %q", sc.Action)
		}
	}
	return errs
}
