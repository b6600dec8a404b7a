// Package config reads trainbot's TOML configuration: DefaultConfig, then
// the file (Parse), then the environment (ApplyEnv: TRAINBOT_DATA_DIR,
// TRAINBOT_TELEGRAM_TOKEN, …), then flags (set by the caller), then
// Validate. Parsing is strict: an unknown key (go-toml's
// DisallowUnknownFields, with a "did you mean" hint) or a wrong type is an
// error naming the key and its line, and every error is reported, not just
// the first.
//
// It is a leaf: the schema, the defaults, and the checks that need nothing
// but the config — Validate's errors, and the likely mistakes `trainbot
// check` warns about (Warnings). A part of trainbot with a table of its
// own declares it (Declare, section.go): the chat transports' [telegram],
// [wecom], [feishu] and [dingtalk] are their packages', decoded, checked
// and read from the environment here like the built-in tables. What the
// values mean to the rest of trainbot — a job's
// parameters, a cron spec, a push channel's URL, quiet hours — is checked
// where they are turned into each package's options, in cmd/trainbot,
// which reports those errors at their keys and lines too (ErrorAt).
package config

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Config is the whole configuration.
type Config struct {
	// DataDir holds the SQLite database, run logs and charts.
	DataDir string `toml:"data_dir"`
	// TimeZone is the zone dates are shown in (历史, runs): an IANA name
	// such as "Asia/Shanghai"; "" is the process's (TZ).
	TimeZone string        `toml:"time_zone"`
	LogLevel string        `toml:"log_level"`
	Console  ConsoleConfig `toml:"console"`
	// Chat is what every transport's chats share: the language.
	Chat ChatConfig `toml:"chat"`
	// Store is the data directory's privacy and retention (store.go).
	Store StoreConfig `toml:"store"`
	Plots PlotsConfig `toml:"plots"`
	GPU   GPUConfig   `toml:"gpu"`
	HTTP  HTTPConfig  `toml:"http"`
	Jobs  []JobConfig `toml:"jobs"`
	// Push channels (push.go), quiet hours of chats, and schedules (schedule.go).
	Push      []PushConfig     `toml:"push"`
	Quiet     []QuietConfig    `toml:"quiet"`
	Schedules []ScheduleConfig `toml:"schedules"`
	// Watch says which logs 关注 may watch from a chat.
	Watch WatchConfig `toml:"watch"`
	// Alerts are alert rules for every job's runs ([[alerts]]); a job's
	// own are [[jobs.alerts]].
	Alerts []AlertRuleConfig `toml:"alerts"`
	// Hosts are the GPU servers reached over SSH ([[hosts]], hosts.go).
	Hosts []HostConfig `toml:"hosts"`
	// MCP is `trainbot mcp`, the server for coding agents.
	MCP MCPConfig `toml:"mcp"`

	// Auth says who may use the chats. The chat transports' own sections
	// ([telegram], [wecom], [feishu], [dingtalk]) are declared by their
	// packages (Declare, section.go).
	Auth AuthConfig `toml:"auth"`

	sections []declared
	// legacyProgress is a deprecated progress_interval of a section
	// ([telegram]'s), nil when the file has none.
	legacyProgress *time.Duration

	file   string
	lines  map[string]int
	failed map[string]bool   // keys that could not be decoded, and each key cut before a '[' (what has an item that could not)
	env    map[string]string // keys set from the environment ("telegram.token") and the variable that set them
}

// ChatConfig is the [chat] section.
type ChatConfig struct {
	// Language is what the bot writes in: "zh", "en" or "zh+en" (English
	// prose with the Chinese command words and bilingual buttons). Empty:
	// each transport's default ("zh" for WeCom, Feishu and DingTalk, "zh+en"
	// for Telegram and the terminal). A transport's own language key
	// overrides it. cmd/trainbot checks the value.
	Language string `toml:"language"`
	// ProgressInterval is the least time between two updates of a run's
	// live progress message, on every transport; "0s" turns live
	// progress off. Unset: [telegram] progress_interval (deprecated, it
	// always applied to every transport), else DefaultProgressInterval.
	// ProgressInterval() gives the one in force.
	ProgressInterval *Duration `toml:"progress_interval"`
}

// DefaultProgressInterval is the least time between two updates of live
// progress when the config says none.
const DefaultProgressInterval = 10 * time.Second

// ProgressInterval is the least time between two updates of a run's live
// progress message: [chat] progress_interval, else the deprecated
// [telegram] progress_interval, else DefaultProgressInterval.
func (c *Config) ProgressInterval() time.Duration {
	if p := c.Chat.ProgressInterval; p != nil {
		return time.Duration(*p)
	}
	if c.legacyProgress != nil {
		return *c.legacyProgress
	}
	return DefaultProgressInterval
}

// InFile reports whether the config file sets key ("telegram.progress_interval").
func (c *Config) InFile(key string) bool {
	_, ok := c.lines[key]
	return ok
}

// ConsoleConfig is the terminal transport.
type ConsoleConfig struct {
	// Language overrides [chat] language for the terminal.
	Language string `toml:"language"`
	// Enabled makes `trainbot serve` read commands from the terminal too.
	Enabled bool `toml:"enabled"`
}

// MCPConfig is `trainbot mcp`, the Model Context Protocol server for
// coding agents.
type MCPConfig struct {
	// AllowControl offers the agents start_run, stop_run and queue_run;
	// without it they only read.
	AllowControl bool `toml:"allow_control"`
}

// PlotsConfig tunes charts (validated in plots.go).
type PlotsConfig struct {
	// Smoothing is the EMA weight of the smoothed loss line, in [0, 1);
	// 0 draws the raw line only.
	Smoothing float64 `toml:"smoothing"`
	// Font is a TTF/OTF/TTC/OTC file with Chinese glyphs for chart titles
	// and legends. "" looks in the usual Debian paths (fonts-noto-cjk,
	// fonts-wqy-zenhei, …); "none" draws Chinese labels in English.
	Font string `toml:"font"`
}

// JobConfig is one [[jobs]] entry.
type JobConfig struct {
	Name        string                 `toml:"name"`
	Description string                 `toml:"description"`
	Command     []string               `toml:"command"`
	Dir         string                 `toml:"dir"`
	Env         map[string]string      `toml:"env"`
	Params      map[string]ParamConfig `toml:"params"`
	Lock        string                 `toml:"lock"`
	StopGrace   Duration               `toml:"stop_grace"`
	KillGrace   Duration               `toml:"kill_grace"`
	StallAfter  Duration               `toml:"stall_after"`
	NaNAfter    int                    `toml:"nan_after"`
	StopOnNaN   bool                   `toml:"stop_on_nan"`
	Patterns    []string               `toml:"patterns"`
	AllRanks    bool                   `toml:"all_ranks"`
	MaxLogSize  ByteSize               `toml:"max_log_size"`
	TailLines   int                    `toml:"tail_lines"`
	OnOOM       *OnOOMConfig           `toml:"on_oom"`
	// OnFailure resumes a run that crashed, was preempted, lost its node
	// or its host (a reboot, the OOM killer) from its newest complete
	// Checkpoint (a glob relative to Dir, or a directory), with Resume
	// appended ("{checkpoint}" in them, or in the command, is its path);
	// 存档 reports the new file there too.
	OnFailure  *OnFailureConfig `toml:"on_failure"`
	Checkpoint string           `toml:"checkpoint"`
	Resume     []string         `toml:"resume"`
	// Alerts are the job's own alert rules.
	Alerts []AlertRuleConfig `toml:"alerts"`
	// MaxQueue bounds the start requests of the job waiting in the queue
	// (排队); default 10.
	MaxQueue int `toml:"max_queue"`
	// TensorBoard is a directory of TensorBoard event files the run
	// writes, relative to Dir; parameters expand ("runs/{run_name}").
	TensorBoard string `toml:"tensorboard"`
	// Runner owns the job's runs: "local" (default: a supervisor process
	// on this host) or "slurm" (sbatch, with the [jobs.slurm] options).
	Runner string       `toml:"runner"`
	Slurm  *SlurmConfig `toml:"slurm"`
	// GPUs is what each run asks of the host's GPUs: how many (gpus = 2)
	// or exactly which (gpus = [0, 3], NVML's indices as 显卡 lists
	// them); GPUMemory the free memory each must have ("20GiB"; alone it
	// asks for one GPU). Unset: none, the job's env says which GPUs.
	GPUs      GPUs     `toml:"gpus"`
	GPUMemory ByteSize `toml:"gpu_memory"`
	// Host is the [[hosts]] entry the job's runs run on; Hosts the ones
	// they may run on, tried in order (the first with the lock and the
	// GPUs free takes a run), or "any". Unset: this host.
	Host  string   `toml:"host"`
	Hosts JobHosts `toml:"hosts"`
	// Signals are the signals the job's runs get: stop (default SIGINT),
	// checkpoint (存档) and control (after 调参 wrote the control file).
	Signals *SignalsConfig `toml:"signals"`
	// Live declares the values 调参 may change while a run goes on (read
	// by the script from $TRAINBOT_CONTROL_FILE), as params are declared.
	Live map[string]ParamConfig `toml:"live"`
}

// SignalsConfig is a job's [jobs.signals]: signal names ("SIGTERM",
// "USR1").
type SignalsConfig struct {
	Stop       string `toml:"stop"`
	Checkpoint string `toml:"checkpoint"`
	Control    string `toml:"control"`
}

// JobHosts is a job's hosts: a list of [[hosts]] names, or "any".
type JobHosts []string

func (h *JobHosts) decodeTOML(v any) error {
	switch x := v.(type) {
	case string:
		if x != "any" {
			return fmt.Errorf("want \"any\" or a list of [[hosts]] names, got %q (one host is host = %q)", x, x)
		}
		*h = JobHosts{"any"}
		return nil
	case []any:
		if len(x) == 0 {
			return fmt.Errorf("want \"any\" or a list of [[hosts]] names, got an empty list")
		}
		out := JobHosts{}
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return fmt.Errorf("want [[hosts]] names, got %v", e)
			}
			out = append(out, s)
		}
		*h = out
		return nil
	}
	return fmt.Errorf("want \"any\" or a list of [[hosts]] names, got %v", v)
}

// MaxGPUs bounds a job's gpus.
const MaxGPUs = 64

// GPUs is a job's gpus: a number or a list of indices.
type GPUs struct {
	Count   int
	Indices []int
}

// Set reports whether the job asks for GPUs by gpus.
func (g GPUs) Set() bool { return g.Count > 0 || len(g.Indices) > 0 }

func (g *GPUs) decodeTOML(v any) error {
	switch x := v.(type) {
	case int64:
		if x < 1 || x > MaxGPUs {
			return fmt.Errorf("want a number of GPUs from 1 to %d (or their indices, like [0, 3]), got %d", MaxGPUs, x)
		}
		g.Count, g.Indices = int(x), nil
		return nil
	case []any:
		if len(x) == 0 || len(x) > MaxGPUs {
			return fmt.Errorf("want 1 to %d GPU indices, like [0, 3], got %d", MaxGPUs, len(x))
		}
		var ix []int
		for _, item := range x {
			n, ok := item.(int64)
			if !ok || n < 0 || n >= 1024 {
				return fmt.Errorf("want GPU indices like [0, 3] (as trainbot gpu lists them), got %s", describe(item))
			}
			if slices.Contains(ix, int(n)) {
				return fmt.Errorf("GPU %d is listed twice", n)
			}
			ix = append(ix, int(n))
		}
		g.Count, g.Indices = len(ix), ix
		return nil
	}
	return fmt.Errorf("want a number of GPUs (gpus = 2) or their indices (gpus = [0, 3]), got %s", describe(v))
}

// SlurmConfig is a job's [jobs.slurm] table: sbatch options. Unset ones
// are the cluster's defaults.
type SlurmConfig struct {
	Partition     string `toml:"partition"`
	Time          string `toml:"time"` // Slurm's [D-]HH:MM:SS
	Nodes         int    `toml:"nodes"`
	NtasksPerNode int    `toml:"ntasks_per_node"`
	CPUsPerTask   int    `toml:"cpus_per_task"`
	GPUs          any    `toml:"gpus"` // 2 or "a100:2" (--gpus)
	Mem           any    `toml:"mem"`  // "32G" (--mem); a number is MB, as sbatch reads it
	Account       string `toml:"account"`
	QOS           string `toml:"qos"`
	// ExtraArgs are passed to sbatch as they are, each one argument.
	ExtraArgs []string `toml:"extra_args"`
}

// WatchConfig is the [watch] section.
type WatchConfig struct {
	// Dirs are the directories whose files 关注 PATH may watch from a
	// chat (default none: 关注 is off; trainbot watch on the host is not
	// limited).
	Dirs []string `toml:"dirs"`
}

// AlertRuleConfig is an [[alerts]] or [[jobs.alerts]] entry: when metric
// is above or below value, or has not improved (no_improvement, by more
// than value), or grows slower than value per second (rate_below), for a
// number of steps or a time, the chats get message.
type AlertRuleConfig struct {
	Metric  string   `toml:"metric"`
	When    string   `toml:"when"`
	Value   *float64 `toml:"value"`
	For     string   `toml:"for"` // "20 steps" or a duration ("10m")
	Message string   `toml:"message"`
}

// ParamConfig declares one job parameter.
type ParamConfig struct {
	Type    string   `toml:"type"`
	Default any      `toml:"default"`
	Min     *float64 `toml:"min"`
	Max     *float64 `toml:"max"`
	Choices []any    `toml:"choices"`
	Env     string   `toml:"env"`
	Help    string   `toml:"help"`
}

// DefaultConfig returns the configuration before any file is read.
func DefaultConfig() *Config {
	return &Config{
		DataDir:  DefaultDataDir(),
		LogLevel: "info",
		Console:  ConsoleConfig{Enabled: false},
		Plots:    PlotsConfig{Smoothing: 0.6},
		GPU:      DefaultGPUConfig(),
		Store:    StoreConfig{KeepSamples: DefaultKeepSamples, KeepAudit: DefaultKeepAudit},
		HTTP:     HTTPConfig{LinkTTL: DefaultLinkTTL, MaxConnections: DefaultMaxConnections},
	}
}

// DefaultDataDir is $XDG_STATE_HOME/trainbot, or ~/.local/state/trainbot.
func DefaultDataDir() string { return DefaultDataDirIn(os.Getenv) }

// DefaultDataDirIn is DefaultDataDir for the environment getenv reads
// (XDG_STATE_HOME, HOME): a command given its environment (trainbot init)
// finds the directory that environment's trainbot uses.
func DefaultDataDirIn(getenv func(string) string) string {
	if d := getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "trainbot")
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	if home == "" {
		return filepath.Join(os.TempDir(), "trainbot-state")
	}
	return filepath.Join(home, ".local", "state", "trainbot")
}

// Load reads and validates a config file on top of the defaults and the
// environment; each of declare declares sections (Declare) first.
func Load(path string, declare ...func(*Config)) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	defer f.Close()
	c := DefaultConfig()
	for _, d := range declare {
		d(c)
	}
	if err := c.Parse(path, f); err != nil {
		return nil, err
	}
	if err := c.ApplyEnv(os.Environ()); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Parse reads TOML from r over the current values. name is used in error
// messages. The error is an Errors listing every problem.
func (c *Config) Parse(name string, r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("read config %s: %w", name, err)
	}
	doc, lines, err := parseDocument(name, data)
	if err != nil {
		return err
	}
	c.file, c.lines = name, lines
	d := &decoder{file: name, lines: lines, errs: unknownKeys(name, data, lines, c.schema())}
	d.decodeStruct("", doc, reflect.ValueOf(c).Elem())
	c.decodeSections(d, doc)
	if len(d.errs) > 0 {
		c.failed = map[string]bool{}
		for _, e := range d.errs {
			c.failed[e.Key] = true
			if e.meant != "" {
				c.failed[e.meant] = true
			}
			for i := range len(e.Key) {
				if e.Key[i] == '[' {
					c.failed[e.Key[:i]] = true
				}
			}
		}
		return d.errs
	}
	return nil
}

// shadowed reports whether key, or an item of it, could not be decoded:
// what Validate would say of its value (a zero left by the failure) is a
// consequence, not another problem. (One lookup: a scan of the failures
// for each error made a config with an error in each of 10,000 jobs
// quadratic.)
func (c *Config) shadowed(key string) bool { return c.failed[key] }

// EnvPrefix starts every environment variable trainbot reads.
const EnvPrefix = "TRAINBOT_"

// ApplyEnv sets scalar keys from TRAINBOT_<SECTION>_<KEY> variables:
// TRAINBOT_DATA_DIR, TRAINBOT_LOG_LEVEL, TRAINBOT_TELEGRAM_TOKEN. Variables
// that name no key are ignored (trainbot sets TRAINBOT_RUN_ID and the like
// for its children).
func (c *Config) ApplyEnv(environ []string) error {
	vars := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, EnvPrefix) {
			vars[k] = v
		}
	}
	var errs Errors
	var walk func(prefix, path string, v reflect.Value)
	walk = func(prefix, path string, v reflect.Value) {
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			tag := t.Field(i).Tag.Get("toml")
			if tag == "" || tag == "-" {
				continue
			}
			f := v.Field(i)
			name, key := prefix+strings.ToUpper(tag), join(path, tag)
			if f.Kind() == reflect.Struct {
				walk(name+"_", key, f)
				continue
			}
			s, ok := vars[name]
			if !ok {
				continue
			}
			if c.env == nil {
				c.env = map[string]string{}
			}
			c.env[key] = name
			if err := setFromString(f, s); err != nil {
				errs = append(errs, envError(name, key, err.Error()))
			}
		}
	}
	walk(EnvPrefix, "", reflect.ValueOf(c).Elem())
	for _, s := range c.sections {
		walk(EnvPrefix+strings.ToUpper(s.name)+"_", s.name, reflect.ValueOf(s.value).Elem())
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

func setFromString(f reflect.Value, s string) error {
	switch f.Type() {
	case durationType:
		d, err := ParseDuration(s)
		if err != nil {
			return err
		}
		f.SetInt(int64(d))
		return nil
	case byteSizeType:
		n, err := ParseByteSize(s)
		if err != nil {
			return err
		}
		f.SetInt(n)
		return nil
	}
	switch f.Kind() {
	case reflect.String:
		f.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("want true or false, got %q", s)
		}
		f.SetBool(b)
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return fmt.Errorf("want an integer, got %q", s)
		}
		f.SetInt(n)
	case reflect.Float64:
		x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return fmt.Errorf("want a number, got %q", s)
		}
		f.SetFloat(x)
	case reflect.Slice:
		if f.Type().Elem().Kind() == reflect.Int64 {
			var out []int64
			for _, p := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
				n, err := strconv.ParseInt(p, 10, 64)
				if err != nil {
					return fmt.Errorf("want comma-separated integers, got %q", s)
				}
				out = append(out, n)
			}
			f.Set(reflect.ValueOf(out))
			return nil
		}
		return fmt.Errorf("cannot be set from the environment")
	default:
		return fmt.Errorf("cannot be set from the environment")
	}
	return nil
}

// File is the config file's name as given ("" before one is parsed).
func (c *Config) File() string { return c.file }

// ErrorAt returns an error for key ("jobs[0].command"), with its file and
// line when the file has the key (or the table around it).
//
// A key the environment set is reported at its variable, not at a line
// of the file: "TRAINBOT_TELEGRAM_TOKEN (environment): telegram.token: …".
func (c *Config) ErrorAt(key, format string, args ...any) *FieldError {
	if name, ok := c.env[key]; ok {
		return envError(name, key, fmt.Sprintf(format, args...))
	}
	d := decoder{file: c.file, lines: c.lines}
	return &FieldError{File: c.file, Line: d.line(key), Key: key, Msg: fmt.Sprintf(format, args...)}
}

// envError is a problem with a value the environment variable name gave
// key.
func envError(name, key, msg string) *FieldError {
	return &FieldError{File: name + " (environment)", Key: key, Msg: msg}
}

// FromEnv reports whether the environment set key ("telegram.token"), and
// the variable that did.
func (c *Config) FromEnv(key string) (string, bool) {
	name, ok := c.env[key]
	return name, ok
}

// Validate checks values; every problem is returned in an Errors.
func (c *Config) Validate() error {
	var errs Errors
	add := func(e *FieldError) { errs = append(errs, e) }
	if strings.TrimSpace(c.DataDir) == "" {
		add(c.ErrorAt("data_dir", "must not be empty"))
	}
	if _, err := ParseLevel(c.LogLevel); err != nil {
		add(c.ErrorAt("log_level", "%v", err))
	}
	for i, d := range c.Watch.Dirs {
		d = ExpandHome(d)
		c.Watch.Dirs[i] = d
		if st, err := os.Stat(d); err != nil || !st.IsDir() || !filepath.IsAbs(d) {
			add(c.ErrorAt(fmt.Sprintf("watch.dirs[%d]", i), "%q: want an absolute path of a directory", d))
		}
	}
	if c.TimeZone != "" {
		if _, err := time.LoadLocation(c.TimeZone); err != nil {
			add(c.ErrorAt("time_zone", "%q is not a time zone: want an IANA name such as \"Asia/Shanghai\" (%v)", c.TimeZone, err))
		}
	}
	errs = append(errs, c.validateStore()...)
	errs = append(errs, c.validatePlots()...)
	errs = append(errs, c.validateGPU()...)
	errs = append(errs, c.validateHTTP()...)
	if p := c.Chat.ProgressInterval; p != nil && time.Duration(*p) != 0 && time.Duration(*p) < 2*time.Second {
		add(c.ErrorAt("chat.progress_interval", "want 2s or more (the messengers limit edits), or 0s for no live progress; got %s", time.Duration(*p)))
	}
	errs = append(errs, c.validateAuth()...)
	errs = append(errs, c.validateSections()...)
	errs = append(errs, c.validatePush()...)
	errs = append(errs, c.validateSchedules()...)
	errs = append(errs, c.validateHosts()...)
	seen := map[string]int{}
	for i, jc := range c.Jobs {
		key := fmt.Sprintf("jobs[%d]", i)
		if jc.Name == "" && !c.shadowed(key+".name") {
			add(c.ErrorAt(key, "a job needs a name"))
		} else if prev, dup := seen[jc.Name]; dup {
			add(c.ErrorAt(key+".name", "job %q is already defined at jobs[%d]", jc.Name, prev))
		} else {
			seen[jc.Name] = i
		}
		errs = append(errs, c.validateJob(i)...)
	}
	errs = slices.DeleteFunc(errs, func(e *FieldError) bool { return c.shadowed(e.Key) })
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// Location is the time zone dates are shown in (time_zone, else TZ).
func (c *Config) Location() *time.Location {
	if c.TimeZone != "" {
		if loc, err := time.LoadLocation(c.TimeZone); err == nil {
			return loc
		}
	}
	return time.Local
}

// ParseLevel reads a log level: debug, info, warn, error.
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.TrimSpace(s))); err != nil {
		return 0, fmt.Errorf("want debug, info, warn or error, got %q", s)
	}
	return l, nil
}

// validateJob checks what is local to job i and needs only the config.
// The command's placeholders, the parameters' values and the output
// patterns are checked where the job is made (cmd/trainbot).
func (c *Config) validateJob(i int) Errors {
	jc := c.Jobs[i]
	key := fmt.Sprintf("jobs[%d]", i)
	var errs Errors
	if len(jc.Command) == 0 {
		errs = append(errs, c.ErrorAt(key+".command", "a job needs a command, e.g. command = [\"python3\", \"train.py\"]"))
	}
	if jc.Dir != "" {
		if st, err := os.Stat(ExpandHome(jc.Dir)); err != nil || !st.IsDir() {
			errs = append(errs, c.ErrorAt(key+".dir", "%q is not a directory", jc.Dir))
		}
	}
	for k := range jc.Env {
		if k == "" || strings.ContainsAny(k, "= \x00") {
			errs = append(errs, c.ErrorAt(key+".env."+k, "%q is not an environment variable name", k))
		}
	}
	if jc.NaNAfter < 0 {
		errs = append(errs, c.ErrorAt(key+".nan_after", "cannot be negative"))
	}
	if jc.MaxQueue < 0 || jc.MaxQueue > 1000 {
		errs = append(errs, c.ErrorAt(key+".max_queue", "want 1..1000 (default 10), got %d", jc.MaxQueue))
	}
	if jc.TailLines < 0 || jc.TailLines > 100000 {
		errs = append(errs, c.ErrorAt(key+".tail_lines", "want 1..100000, got %d", jc.TailLines))
	}
	errs = append(errs, c.validateOnOOM(i)...)
	switch jc.Runner {
	case "", "local", "slurm":
	default:
		errs = append(errs, c.ErrorAt(key+".runner", "%q: want \"local\" (this host) or \"slurm\" (sbatch)", jc.Runner))
	}
	if jc.Slurm != nil && jc.Runner != "slurm" {
		errs = append(errs, c.ErrorAt(key+".slurm", "Slurm options apply to a job with runner = \"slurm\""))
	}
	if jc.Runner == "slurm" {
		switch {
		case len(jc.GPUs.Indices) > 0:
			errs = append(errs, c.ErrorAt(key+".gpus", "Slurm allocates the GPUs itself: give a number (gpus = 2), not indices"))
		case jc.GPUs.Set() && jc.Slurm != nil && jc.Slurm.GPUs != nil:
			errs = append(errs, c.ErrorAt(key+".gpus", "give only one of gpus and slurm.gpus"))
		case jc.GPUMemory > 0:
			errs = append(errs, c.ErrorAt(key+".gpu_memory", "Slurm chooses the GPUs: ask for their type in slurm.gpus (\"a100:2\") instead"))
		}
	}
	switch {
	case jc.Host != "" && len(jc.Hosts) > 0:
		errs = append(errs, c.ErrorAt(key+".hosts", "give host (one) or hosts (several), not both"))
	case jc.Host != "" && c.Host(jc.Host) == nil:
		errs = append(errs, c.ErrorAt(key+".host", "%q is not a [[hosts]] name%s", jc.Host, c.hostNames()))
	}
	for hi, h := range jc.Hosts {
		if h != "any" && c.Host(h) == nil {
			errs = append(errs, c.ErrorAt(fmt.Sprintf("%s.hosts[%d]", key, hi), "%q is not a [[hosts]] name%s", h, c.hostNames()))
		}
	}
	if (jc.Host != "" || len(jc.Hosts) > 0) && jc.Runner == "slurm" {
		errs = append(errs, c.ErrorAt(key+".runner", "a Slurm job runs where Slurm puts it: give runner = \"slurm\" or host, not both"))
	}
	errs = append(errs, c.validateParams(key+".params", jc.Params)...)
	errs = append(errs, c.validateParams(key+".live", jc.Live)...)
	if sc := jc.Signals; sc != nil {
		for _, f := range []struct{ key, name string }{{"stop", sc.Stop}, {"checkpoint", sc.Checkpoint}, {"control", sc.Control}} {
			if _, ok := SignalNumber(f.name); f.name != "" && !ok {
				errs = append(errs, c.ErrorAt(key+".signals."+f.key, "%q is not a signal name: want one like \"SIGTERM\" or \"SIGUSR1\"", f.name))
			}
		}
	}
	return errs
}

// validateParams checks the declarations of a job's params or live values
// under key.
func (c *Config) validateParams(key string, params map[string]ParamConfig) Errors {
	var errs Errors
	names := make([]string, 0, len(params))
	for n := range params {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		pc := params[n]
		pkey := key + "." + n
		if pc.Type == "" {
			errs = append(errs, c.ErrorAt(pkey+".type", "missing: int, float, string or bool"))
		}
		if (pc.Min != nil || pc.Max != nil) && pc.Type != "int" && pc.Type != "float" {
			errs = append(errs, c.ErrorAt(pkey, "min and max apply to int and float parameters only"))
		}
	}
	return errs
}

// DefaultText is the parameter's default as text ("64", "0.001"), and
// whether it has one.
func (p ParamConfig) DefaultText() (string, bool) {
	if p.Default == nil {
		return "", false
	}
	return ScalarText(p.Default), true
}

// ChoicesText is the parameter's choices as text.
func (p ParamConfig) ChoicesText() []string {
	var out []string
	for _, ch := range p.Choices {
		out = append(out, ScalarText(ch))
	}
	return out
}

// ScalarText writes a TOML scalar as text: "adam", "64", "0.001", "true".
func ScalarText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	}
	return fmt.Sprint(v)
}

// ExpandHome replaces a leading "~/" with the home directory.
func ExpandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, strings.TrimPrefix(p, "~"))
		}
	}
	return p
}

// IsInvalid reports whether err is a config error.
func IsInvalid(err error) bool { return errors.Is(err, ErrInvalid) }
