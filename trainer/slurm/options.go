package slurm

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// ErrInvalidOption is wrapped by every error of Options.Validate.
var ErrInvalidOption = errors.New("invalid slurm option")

// OptionError is an error of Options.Validate: which option ([jobs.slurm]'s
// key: "time", "extra_args[1]"), its value, and what is wanted.
type OptionError struct {
	Field, Value, Want string
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("%v: %s %q: %s", ErrInvalidOption, e.Field, e.Value, e.Want)
}

// Unwrap makes errors.Is(err, ErrInvalidOption) true.
func (e *OptionError) Unwrap() error { return ErrInvalidOption }

// Options are the sbatch options of a job. The zero value asks for nothing:
// the cluster's defaults apply. Field names in errors are the config's
// ([jobs.slurm]): partition, time, nodes, ...
type Options struct {
	Partition     string // --partition; a comma-separated list is allowed
	Time          string // --time: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED
	Nodes         int    // --nodes (0: not given)
	NtasksPerNode int    // --ntasks-per-node (0: not given)
	CPUsPerTask   int    // --cpus-per-task (0: not given)
	GPUs          string // --gpus: "[type:]count", e.g. "2" or "a100:2"
	Mem           string // --mem: a size with an optional K, M, G or T (MB by default); "0" is all of a node's memory
	Account       string // --account
	QOS           string // --qos
	// ExtraArgs are passed to sbatch after the options above, each as one
	// argument; write options as "--name=value". Those that would take the
	// job's output, name or directory away from trainbot are refused.
	ExtraArgs []string
}

var (
	// Slurm's time_str2secs takes these forms (and "-1", INFINITE, UNLIMITED);
	// it does not check that minutes or seconds are below 60.
	timeRE = regexp.MustCompile(`^(\d+|\d+:\d+|\d+:\d+:\d+|\d+-\d+|\d+-\d+:\d+|\d+-\d+:\d+:\d+)$`)
	// str_to_mbytes: a number, then K, M, G or T, optionally followed by B.
	memRE = regexp.MustCompile(`^\d+([kKmMgGtT][bB]?)?$`)
	// --gpus: [type:]count, several separated by commas.
	gpusRE = regexp.MustCompile(`^([A-Za-z0-9_.-]+:)?[1-9]\d*(,([A-Za-z0-9_.-]+:)?[1-9]\d*)*$`)
)

// owned are the sbatch options Submit sets itself; ExtraArgs may not change
// them (trainbot would then lose the job's output or not find it).
var owned = []struct{ long, short string }{
	{"--output", "-o"},
	{"--error", "-e"},
	{"--input", "-i"},
	{"--open-mode", ""},
	{"--job-name", "-J"},
	{"--chdir", "-D"},
	{"--parsable", ""},
	{"--wrap", ""},
	{"--array", "-a"},
	{"--wait", "-W"},
}

// Validate checks the options' syntax (not whether the cluster has such a
// partition or account: sbatch says so at submission).
func (o Options) Validate() error {
	bad := func(field, value, want string) error {
		return &OptionError{Field: field, Value: value, Want: want}
	}
	for _, f := range []struct{ name, value string }{
		{"partition", o.Partition}, {"account", o.Account}, {"qos", o.QOS},
	} {
		if f.value != "" && !isName(f.value) {
			return bad(f.name, f.value, "want a name without spaces that does not start with '-'")
		}
	}
	if o.Time != "" && !validTime(o.Time) {
		return bad("time", o.Time, "want Slurm's [D-]HH:MM:SS, or MM, MM:SS, D-HH, D-HH:MM, UNLIMITED")
	}
	for _, f := range []struct {
		name string
		n    int
	}{{"nodes", o.Nodes}, {"ntasks_per_node", o.NtasksPerNode}, {"cpus_per_task", o.CPUsPerTask}} {
		if f.n < 0 {
			return bad(f.name, strconv.Itoa(f.n), "want a positive number (0: not given)")
		}
	}
	if o.GPUs != "" && !gpusRE.MatchString(o.GPUs) {
		return bad("gpus", o.GPUs, `want a count or "type:count", e.g. "2" or "a100:2"`)
	}
	if o.Mem != "" && !memRE.MatchString(o.Mem) {
		return bad("mem", o.Mem, `want a size like "16G", "500M" or "0" (all of a node's memory)`)
	}
	for i, a := range o.ExtraArgs {
		field := fmt.Sprintf("extra_args[%d]", i)
		if a == "" || strings.ContainsRune(a, 0) {
			return bad(field, a, "want a non-empty argument without NUL")
		}
		if !strings.HasPrefix(a, "-") && (i == 0 || !takesValue(o.ExtraArgs[i-1])) {
			// sbatch would take it for the script and our script for its argument.
			return bad(field, a, `not an option: write options as "--name=value"`)
		}
		if strings.HasPrefix(a, "-") {
			if opt := ownedOption(a); opt != "" {
				return bad(field, a, "trainbot sets "+opt+" itself")
			}
		}
	}
	return nil
}

// takesValue says whether a may be an option whose value is the next
// argument ("--constraint", "a100"): an option without "=".
func takesValue(a string) bool {
	if strings.HasPrefix(a, "--") {
		return !strings.Contains(a, "=")
	}
	return len(a) == 2 && a[0] == '-'
}

// ownedOption returns the option of owned that a sets, or "".
func ownedOption(a string) string {
	for _, o := range owned {
		if a == o.long || strings.HasPrefix(a, o.long+"=") {
			return o.long
		}
		// Short options take their value attached ("-ofile") or next.
		if o.short != "" && !strings.HasPrefix(a, "--") && strings.HasPrefix(a, o.short) {
			return o.long
		}
	}
	return ""
}

func validTime(s string) bool {
	switch strings.ToUpper(s) {
	case "UNLIMITED", "INFINITE", "-1":
		return true
	}
	return timeRE.MatchString(s)
}

func isName(s string) bool {
	if strings.HasPrefix(s, "-") {
		return false
	}
	for _, c := range s {
		if unicode.IsSpace(c) || unicode.IsControl(c) {
			return false
		}
	}
	return true
}

// args are the sbatch arguments for the options, in "--name=value" form so
// that no value can be read as an option.
func (o Options) args() []string {
	var a []string
	add := func(name, value string) {
		if value != "" {
			a = append(a, "--"+name+"="+value)
		}
	}
	num := func(name string, n int) {
		if n > 0 {
			add(name, strconv.Itoa(n))
		}
	}
	add("partition", o.Partition)
	add("time", o.Time)
	num("nodes", o.Nodes)
	num("ntasks-per-node", o.NtasksPerNode)
	num("cpus-per-task", o.CPUsPerTask)
	add("gpus", o.GPUs)
	add("mem", o.Mem)
	add("account", o.Account)
	add("qos", o.QOS)
	return append(a, o.ExtraArgs...)
}
