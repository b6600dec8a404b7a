package trainer

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/trainbot/trainbot/trainer/shimctl"
	"github.com/trainbot/trainbot/trainer/slurm"
)

// ParamType is the type of a job parameter.
type ParamType string

// Parameter types.
const (
	ParamInt    ParamType = "int"
	ParamFloat  ParamType = "float"
	ParamString ParamType = "string"
	ParamBool   ParamType = "bool"
)

// ParamSpec declares one parameter a job accepts from chat.
type ParamSpec struct {
	Type       ParamType
	Default    string // canonical text of the default; used when HasDefault
	HasDefault bool   // without a default the parameter must be given
	Min, Max   *float64
	Choices    []string // allowed values (strings; ints and floats too)
	Env        string   // also passed as this environment variable
	Help       string
}

// Job is a configured training job.
type Job struct {
	Name        string
	Description string
	// Command is the argv to execute; "{name}" in any item is replaced by the
	// value of parameter name. It never goes through a shell.
	Command []string
	Dir     string
	Env     map[string]string // added to trainbot's own environment
	Params  map[string]ParamSpec
	// Lock names the lock the job's runs hold; jobs with the same Lock (for
	// example the same GPUs) never run at the same time. Default: the name.
	Lock string

	StopGrace   time.Duration // after SIGINT, before SIGTERM
	KillGrace   time.Duration // after SIGTERM, before SIGKILL
	StallAfter  time.Duration // no output for this long: a stalled alert (0: never)
	NaNAfter    int           // this many NaN/Inf loss points in a row: a nan alert
	StopOnNaN   bool          // and stop the run
	Patterns    []string      // extra regular expressions with named groups for logparse
	AllRanks    bool          // distributed runs: keep other ranks' metrics as rankN/NAME (default: rank 0's only)
	MaxLogBytes int64         // cap on the run log file (0: no cap)
	TailLines   int           // lines kept in memory for the log command
	// TensorBoard is a directory where the run writes TensorBoard event
	// files ("runs/{run_name}"), relative to Dir; "{name}" is replaced by
	// a parameter's value, "{run_id}" by the run's id. Its scalars are
	// metric points too. "": none.
	TensorBoard string

	// OnOOM restarts a run that ran out of memory with a parameter halved;
	// nil: no automatic retry.
	OnOOM *OOMRetry
	// OnFailure resumes a run that ended for a reason in its When (a
	// crash, a preemption, a reboot…) from the newest complete
	// Checkpoint, with Resume appended ({checkpoint} in them, or in the
	// command, is its path); nil: no resume.
	OnFailure *FailureRetry
	Resume    []string
	// Checkpoint is where the job's runs write checkpoints: a glob
	// ("ckpt/*.pt") or a directory (its files), relative to Dir. 存档
	// reports the new file there; on_failure resumes from the newest
	// complete one (NewestCheckpoint). "": none.
	Checkpoint string

	// Runner owns the job's runs: RunnerLocal (a trainbot shim on this
	// host; "" means it) or RunnerSlurm (a Slurm batch job submitted with
	// sbatch, with the Slurm options).
	Runner string
	Slurm  slurm.Options

	// MaxQueue bounds the start requests of this job waiting in the queue
	// (排队); 0: DefaultMaxQueue.
	MaxQueue int

	// Alerts are the job's own alert rules ([[jobs.alerts]]); the
	// supervisor's Options.Alerts apply too.
	Alerts []AlertRule

	// GPUs is what each run asks of the host's GPUs (gpus, gpu_memory;
	// a start's gpus= or gpu= overrides it); zero: none, as before. A
	// Slurm job's count goes to sbatch's --gpus.
	GPUs GPURequest
	// Signals are the signals the job's runs get for a stop, a
	// checkpoint (存档) and a change of their live values (调参).
	Signals Signals
	// Live are the values a run reads from its control file
	// (EnvControlFile) while it runs, changed by 调参: declared and
	// checked as Params are.
	Live map[string]ParamSpec

	// Hosts are where the job's runs may run, [[hosts]] names tried in
	// order (the first with the lock and the GPUs free takes the run);
	// []string{HostsAny} is every configured host; nil is this host.
	Hosts []string
}

// Job defaults.
const (
	DefaultStopGrace   = shimctl.DefaultStopGrace // the run's supervisor applies them
	DefaultKillGrace   = shimctl.DefaultKillGrace
	DefaultNaNAfter    = 3
	DefaultTailLines   = 1000
	DefaultMaxLogBytes = 1 << 30
)

// KeyError is a field of a job (or of an alert rule) at fault: Key is its
// path under the job or rule ("params.bs.default", "alerts[0].for",
// "command"), a fact a config check turns into the key and its line
// without reading the sentence back.
type KeyError struct {
	Key string
	Msg string
}

func (e *KeyError) Error() string { return e.Key + ": " + e.Msg }

func keyErr(key, format string, args ...any) error {
	return &KeyError{Key: key, Msg: fmt.Sprintf(format, args...)}
}

// under puts the KeyErrors of err (one, or joined) under prefix: a rule's
// "for" becomes "alerts[2].for". Other errors are named by prefix.
func under(prefix string, err error) error {
	var out []error
	for _, e := range flatten(err) {
		if ke, ok := e.(*KeyError); ok {
			out = append(out, &KeyError{Key: prefix + "." + ke.Key, Msg: ke.Msg})
		} else {
			out = append(out, &KeyError{Key: prefix, Msg: e.Error()})
		}
	}
	return errors.Join(out...)
}

// flatten lists the errors joined in err (errors.Join), err itself if none.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

// Normalize fills defaults and validates the job; errors name the field
// (KeyError, joined).
func (j *Job) Normalize() error {
	var errs []error
	if !validName.MatchString(j.Name) {
		errs = append(errs, fmt.Errorf("name %q: want letters, digits, '-', '_' or '.'", j.Name))
	} else if ReadsAsValue(j.Name) {
		errs = append(errs, fmt.Errorf("name %q reads as a number: 开始 %s would not be taken for the job; give it a name with a letter that is not a number", j.Name, j.Name))
	}
	if len(j.Command) == 0 || strings.TrimSpace(j.Command[0]) == "" {
		errs = append(errs, keyErr("command", "must name a program"))
	}
	if j.Lock == "" {
		j.Lock = j.Name
	}
	switch j.Runner {
	case "":
		j.Runner = RunnerLocal
	case RunnerLocal, RunnerSlurm:
	default:
		errs = append(errs, fmt.Errorf("runner %q: want %q or %q", j.Runner, RunnerLocal, RunnerSlurm))
	}
	if len(j.Hosts) > 0 {
		switch {
		case j.Runner == RunnerSlurm:
			errs = append(errs, keyErr("hosts", "a Slurm job runs where Slurm puts it: give runner = \"slurm\" or host, not both"))
		case j.TensorBoard != "":
			errs = append(errs, keyErr("tensorboard", "event files are read on this host only: a job on another host reports through its output or $TRAINBOT_METRICS_FILE"))
		}
	}
	if j.Runner == RunnerSlurm {
		if err := j.Slurm.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if j.StopGrace <= 0 {
		j.StopGrace = DefaultStopGrace
	}
	if j.KillGrace <= 0 {
		j.KillGrace = DefaultKillGrace
	}
	if j.NaNAfter <= 0 {
		j.NaNAfter = DefaultNaNAfter
	}
	if j.TailLines <= 0 {
		j.TailLines = DefaultTailLines
	}
	if j.MaxQueue <= 0 {
		j.MaxQueue = DefaultMaxQueue
	}
	if j.MaxLogBytes == 0 {
		j.MaxLogBytes = DefaultMaxLogBytes
	}
	for name, spec := range j.Params {
		if err := spec.check("params", name); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, j.checkOnFailure()...)
	for name, spec := range j.Live {
		if err := spec.check("live", name); err != nil {
			errs = append(errs, err)
		}
	}
	if err := j.Signals.normalize(); err != nil {
		errs = append(errs, err)
	}
	if err := j.checkOnOOM(); err != nil {
		errs = append(errs, err)
	}
	for i, r := range j.Alerts {
		if err := r.Validate(); err != nil {
			errs = append(errs, under(fmt.Sprintf("alerts[%d]", i), err))
		}
	}
	for _, item := range j.Command {
		for _, ref := range placeholders(item) {
			if _, ok := j.Params[ref]; !ok && (ref != CheckpointPlaceholder || j.OnFailure == nil) {
				errs = append(errs, keyErr("command", "%q refers to {%s}, which is not a declared parameter", item, ref))
			}
		}
	}
	for _, ref := range placeholders(j.TensorBoard) {
		if _, ok := j.Params[ref]; !ok && ref != runIDPlaceholder {
			errs = append(errs, keyErr("tensorboard", "%q refers to {%s}, which is not a declared parameter (nor {%s})", j.TensorBoard, ref, runIDPlaceholder))
		}
	}
	return errors.Join(errs...)
}

// runIDPlaceholder is the run's id in TensorBoard.
const runIDPlaceholder = "run_id"

// TensorBoardDir is the directory of a run's event files: TensorBoard
// with the run's parameters and id, relative to the job's Dir (or to
// trainbot's working directory, where the run starts without a Dir).
// "" when the job has none.
func (j *Job) TensorBoardDir(r *Run) string {
	if j.TensorBoard == "" {
		return ""
	}
	dir := placeholderRE.ReplaceAllStringFunc(j.TensorBoard, func(m string) string {
		name := m[1 : len(m)-1]
		if v, ok := r.Params[name]; ok {
			return v
		}
		if name == runIDPlaceholder {
			return strconv.FormatInt(r.ID, 10)
		}
		return m
	})
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(j.Dir, dir)
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return dir
}

var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// ReadsAsValue reports whether a word reads as a number ("32", "1e-3",
// "nan", "inf"): such a word after 开始 is not taken for a job name.
func ReadsAsValue(word string) bool {
	_, err := strconv.ParseFloat(word, 64)
	return err == nil || errors.Is(err, strconv.ErrRange)
}

// placeholderRE finds "{name}", and "{{" and "}}", which are literal braces.
var placeholderRE = regexp.MustCompile(`\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}`)

func placeholders(s string) []string {
	var out []string
	for _, m := range placeholderRE.FindAllStringSubmatch(s, -1) {
		if m[1] != "" {
			out = append(out, m[1])
		}
	}
	return out
}

// expand replaces each "{name}" in item with value(name), "{{" with "{" and
// "}}" with "}".
func expand(item string, value func(name string) string) string {
	return placeholderRE.ReplaceAllStringFunc(item, func(m string) string {
		switch m {
		case "{{":
			return "{"
		case "}}":
			return "}"
		}
		return value(m[1 : len(m)-1])
	})
}

// check validates the spec of parameter name in section ("params" or
// "live").
func (p ParamSpec) check(section, name string) error {
	key := section + "." + name
	if !validParam.MatchString(name) {
		return keyErr(key, "a parameter name is letters, digits and '_'")
	}
	switch p.Type {
	case ParamInt, ParamFloat, ParamString, ParamBool:
	default:
		return keyErr(key+".type", "%q is not one of int, float, string, bool", p.Type)
	}
	if p.Min != nil && p.Max != nil && *p.Min > *p.Max {
		return keyErr(key, "min %g is above max %g", *p.Min, *p.Max)
	}
	for _, c := range p.Choices {
		if _, err := p.canonical(c); err != nil {
			return keyErr(key+".choices", "%q: %v", c, err)
		}
	}
	if p.HasDefault {
		if _, err := p.canonical(p.Default); err != nil {
			return keyErr(key+".default", "%q: %v", p.Default, err)
		}
	}
	return nil
}

var validParam = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// canonical checks a value against the spec and returns the text passed to
// the job.
func (p ParamSpec) canonical(v string) (string, error) {
	v = strings.TrimSpace(v)
	var num float64
	isNum := false
	switch p.Type {
	case ParamInt:
		n, err := strconv.ParseInt(v, 10, 64)
		if errors.Is(err, strconv.ErrRange) {
			return "", badValue(ParamIntRange, "", "out of range for a 64-bit integer")
		}
		if err != nil {
			return "", badValue(ParamNotInt, "", "not an integer")
		}
		num, isNum = float64(n), true
		v = strconv.FormatInt(n, 10)
	case ParamFloat:
		f, err := strconv.ParseFloat(v, 64)
		if errors.Is(err, strconv.ErrRange) && !strings.ContainsAny(v, "_xXpP") {
			return "", badValue(ParamFloatRange, "", "out of range for a 64-bit float")
		}
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || strings.ContainsAny(v, "_xXpP") {
			return "", badValue(ParamNotNumber, "", "not a number")
		}
		num, isNum = f, true
	case ParamBool:
		switch strings.ToLower(v) {
		case "true", "1", "yes", "on", "y":
			v = "true"
		case "false", "0", "no", "off", "n":
			v = "false"
		default:
			return "", badValue(ParamNotBool, "", "not true or false")
		}
	case ParamString:
		if strings.ContainsRune(v, 0) {
			return "", badValue(ParamNUL, "", "contains a NUL byte")
		}
	}
	if isNum {
		if p.Min != nil && num < *p.Min {
			return "", badValue(ParamBelowMin, fmt.Sprintf("%g", *p.Min), "below the minimum %g", *p.Min)
		}
		if p.Max != nil && num > *p.Max {
			return "", badValue(ParamAboveMax, fmt.Sprintf("%g", *p.Max), "above the maximum %g", *p.Max)
		}
	}
	if len(p.Choices) > 0 {
		ok := false
		for _, c := range p.Choices {
			if c == v || (isNum && sameNumber(c, num)) {
				ok = true
				break
			}
		}
		if !ok {
			return "", badValue(ParamNotChoice, strings.Join(p.Choices, ", "), "not one of %s", strings.Join(p.Choices, ", "))
		}
	}
	return v, nil
}

func sameNumber(s string, v float64) bool {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	return err == nil && f == v
}

// ParamError says which parameter was refused and why.
type ParamError struct {
	Job    string
	Param  string
	Value  string
	Given  bool   // the value was given (it may be "")
	Reason string // a predicate: "is not an integer (int 1..4096, default 64)"
	// Problem, Limit and Spec say the same as Reason in parts, for texts in
	// other languages: what is wrong, the bound or the choices it broke
	// ("4096", "adam, sgd"), and the parameter's description (Describe).
	// For an unknown parameter, Limit lists the job's parameters.
	Problem ParamProblem
	Limit   string
	Spec    string
	// Declared is the parameter's declaration Spec describes (zero for an
	// unknown parameter): texts in other languages describe it from this.
	Declared ParamSpec
}

// ParamProblem is what is wrong with a parameter's value.
type ParamProblem int

// The problems a parameter can have.
const (
	ParamUnknown    ParamProblem = iota + 1 // the job has no such parameter
	ParamRequired                           // no value and no default
	ParamNotInt                             // not an integer
	ParamIntRange                           // an integer beyond 64 bits
	ParamNotNumber                          // not a number
	ParamFloatRange                         // a number beyond float64
	ParamNotBool                            // not true or false
	ParamNUL                                // a NUL byte in a string
	ParamBelowMin                           // below Min (Limit)
	ParamAboveMax                           // above Max (Limit)
	ParamNotChoice                          // not one of the choices (Limit)
	ParamNoGPU                              // gpus= or gpu= that asks for no GPU (Spec says what would)
)

// valueError is what canonical says of a value: the problem and its
// English wording.
type valueError struct {
	problem ParamProblem
	limit   string
	msg     string
}

func (e *valueError) Error() string { return e.msg }

func badValue(p ParamProblem, limit, format string, args ...any) error {
	return &valueError{problem: p, limit: limit, msg: fmt.Sprintf(format, args...)}
}

// Error reads `batch_size: "1;rm" is not an integer (int 1..4096, default
// 64)`, or `batch_size is required (…)` for a missing value.
func (e *ParamError) Error() string {
	if e.Value == "" && !e.Given {
		return fmt.Sprintf("%s %s", e.Param, e.Reason)
	}
	return fmt.Sprintf("%s: %q %s", e.Param, e.Value, e.Reason)
}

// ErrBadParam is wrapped by every ParamError.
var ErrBadParam = errors.New("bad parameter")

// Unwrap makes errors.Is(err, ErrBadParam) true.
func (e *ParamError) Unwrap() error { return ErrBadParam }

// ResolveParams validates the given values against the job's declared
// parameters and fills in defaults. A start's gpus= and gpu= (the run's
// GPU request, unless the job has parameters of those names) are checked
// and left out. Every refusal is returned, joined.
func (j *Job) ResolveParams(given map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(j.Params))
	var errs []error
	keys := make([]string, 0, len(given))
	for k := range given {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if j.isGPUParam(k) { // gpus= or gpu=: the run's GPU request, not a parameter
			if pe := j.gpuParamError(k, given[k]); pe != nil {
				errs = append(errs, pe)
			}
			continue
		}
		spec, ok := j.Params[k]
		if !ok {
			reason := "is an unknown parameter"
			names := j.ParamNames()
			if len(names) > 0 {
				reason += "; " + j.Name + " takes " + strings.Join(names, ", ")
			} else {
				reason += "; " + j.Name + " takes no parameters"
			}
			errs = append(errs, &ParamError{Job: j.Name, Param: k, Value: given[k], Given: true, Reason: reason, Problem: ParamUnknown, Limit: strings.Join(names, ", ")})
			continue
		}
		v, err := spec.canonical(given[k])
		if err != nil {
			pe := &ParamError{Job: j.Name, Param: k, Value: given[k], Given: true, Reason: "is " + err.Error() + " (" + spec.Describe() + ")", Spec: spec.Describe(), Declared: spec}
			if ve := (*valueError)(nil); errors.As(err, &ve) {
				pe.Problem, pe.Limit = ve.problem, ve.limit
			}
			errs = append(errs, pe)
			continue
		}
		out[k] = v
	}
	for _, name := range j.ParamNames() {
		if _, ok := out[name]; ok {
			continue
		}
		if _, refused := given[name]; refused {
			continue
		}
		spec := j.Params[name]
		if !spec.HasDefault {
			errs = append(errs, &ParamError{Job: j.Name, Param: name, Reason: "is required (" + spec.Describe() + ")", Problem: ParamRequired, Spec: spec.Describe(), Declared: spec})
			continue
		}
		v, _ := spec.canonical(spec.Default)
		out[name] = v
	}
	return out, errors.Join(errs...)
}

// paramTypes is the declared type of each parameter.
func (j *Job) paramTypes() map[string]ParamType {
	out := make(map[string]ParamType, len(j.Params))
	for n, p := range j.Params {
		out[n] = p.Type
	}
	return out
}

// paramRanges is the min and max of each parameter that declares one; nil
// when none does.
func (j *Job) paramRanges() map[string]ParamRange {
	var out map[string]ParamRange
	for n, p := range j.Params {
		if p.Min == nil && p.Max == nil {
			continue
		}
		if out == nil {
			out = map[string]ParamRange{}
		}
		out[n] = ParamRange{Min: p.Min, Max: p.Max}
	}
	return out
}

// ParamNames returns the declared parameter names, sorted.
func (j *Job) ParamNames() []string {
	names := make([]string, 0, len(j.Params))
	for n := range j.Params {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Describe is a short human description such as "int 1..4096, default 64".
func (p ParamSpec) Describe() string {
	var b strings.Builder
	b.WriteString(string(p.Type))
	// An int's bounds are written as ints: "int 1..10000000", not 1e+07.
	bound := func(v float64) string {
		if p.Type == ParamInt && v == math.Trunc(v) && math.Abs(v) < 1e18 {
			return strconv.FormatInt(int64(v), 10)
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	switch {
	case p.Min != nil && p.Max != nil:
		b.WriteString(" " + bound(*p.Min) + ".." + bound(*p.Max))
	case p.Min != nil:
		b.WriteString(" ≥ " + bound(*p.Min))
	case p.Max != nil:
		b.WriteString(" ≤ " + bound(*p.Max))
	}
	if len(p.Choices) > 0 {
		b.WriteString(" one of " + strings.Join(p.Choices, "|"))
	}
	if p.HasDefault {
		b.WriteString(", default " + p.Default)
	} else {
		b.WriteString(", required")
	}
	return b.String()
}

// Argv returns the command with the parameters substituted, and the
// environment entries that carry them: TRAINBOT_PARAM_<NAME> for every
// parameter, plus the parameter's own Env name when it has one.
func (j *Job) Argv(params map[string]string) (argv []string, env []string) {
	argv = make([]string, len(j.Command))
	for i, item := range j.Command {
		argv[i] = expand(item, func(name string) string { return params[name] })
	}
	for _, name := range j.ParamNames() {
		v, ok := params[name]
		if !ok {
			continue
		}
		env = append(env, "TRAINBOT_PARAM_"+strings.ToUpper(name)+"="+v)
		if e := j.Params[name].Env; e != "" {
			env = append(env, e+"="+v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(j.Env)) {
		env = append(env, k+"="+j.Env[k])
	}
	return argv, env
}
