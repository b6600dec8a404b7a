package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	root "github.com/trainbot/trainbot"
	"github.com/trainbot/trainbot/config"
	"github.com/trainbot/trainbot/gpu"
	"github.com/trainbot/trainbot/internal/termsafe"
	"github.com/trainbot/trainbot/internal/units"
)

// cmdInit writes a starter config where every command looks for one
// (--config, $TRAINBOT_CONFIG, else the default path): this machine's
// facts, a job for the script given, and the example config commented
// out below them. It never overwrites a config without --force, and it
// checks what it wrote the way trainbot check does.
func cmdInit(ctx context.Context, args []string, e env) int {
	fs := newFlags("init", "[--job SCRIPT] [--name NAME] [--config FILE] [--force]", e)
	var cf configFlags
	cf.register(fs, false)
	fs.Lookup("config").Usage = "where to write the config; default $TRAINBOT_CONFIG, else " + displayPath(defaultConfigPath(os.Environ()))
	script := fs.String("job", "", "your training script (train.py, run.sh or an executable): a job that runs it")
	name := fs.String("name", "", "the job's name (default: the script's name without its extension)")
	force := fs.Bool("force", false, "replace an existing config (the old one is kept as FILE.bak)")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if *script == "" && len(pos) == 1 {
		*script, pos = pos[0], nil // "trainbot init train.py" works too
	}
	if len(pos) > 0 {
		return usageError(fs, e, "unexpected argument %q", pos[0])
	}
	path := cf.config
	if path == "" {
		path = getenv(e.environ, ConfigEnv)
	}
	if path == "" {
		path = defaultConfigPath(e.environ)
	}
	if path == "" {
		return usageError(fs, e, "no home directory to put the config in: give --config FILE")
	}
	if _, err := os.Stat(path); err == nil && !*force {
		return errorf(e, "%s exists: 'trainbot check' validates it; --force replaces it (keeping it as %s.bak)", path, path)
	}
	dataDir := cf.data
	if dataDir == "" {
		dataDir = getenv(e.environ, "TRAINBOT_DATA_DIR")
	}
	if dataDir == "" {
		dataDir = config.DefaultDataDirIn(func(k string) string { return getenv(e.environ, k) })
	}
	var job *initJob
	if *script != "" {
		j, err := newInitJob(*script, *name, e.environ)
		if err != nil {
			return usageError(fs, e, "--job %s: %v", *script, err)
		}
		job = j
	}
	gpus := initGPUs(ctx)
	text := starterConfig(dataDir, job, gpus)
	if err := writeStarter(path, text, *force); err != nil {
		return errorf(e, "%v", err)
	}
	// What init wrote must pass check: a starter that does not is our bug,
	// and the user is told at once rather than at their first 开始.
	if _, _, err := parseConfig(path, e.environ, nil); err != nil {
		var errs config.Errors
		if errors.As(err, &errs) {
			reportConfig(e, errs)
		}
		return errorf(e, "%s was written but does not pass 'trainbot check': %v", path, err)
	}
	fmt.Fprintf(e.stdout, "wrote %s (mode 0600)\n", path)
	fmt.Fprintf(e.stdout, "data directory %s (database, run logs, charts)\n", dataDir)
	fmt.Fprintln(e.stdout, gpus.summary())
	flags := ""
	if probe := (configFlags{}); probe.find(env{environ: e.environ}) != nil || !samePath(probe.config, path) {
		flags = " --config " + termsafe.Argv([]string{path})
	}
	if job != nil {
		fmt.Fprintf(e.stdout, "job %s runs %s in %s", job.name, termsafe.Argv(job.command), job.dir)
		if len(job.params) > 0 {
			names := make([]string, len(job.params))
			for i, p := range job.params {
				names[i] = p.name
			}
			fmt.Fprintf(e.stdout, "; parameters from its argparse: %s (开始 %s=%s)", strings.Join(names, ", "), job.params[0].name, job.params[0].def)
		}
		fmt.Fprintln(e.stdout)
	}
	fmt.Fprintln(e.stdout, "\nNext:")
	fmt.Fprintf(e.stdout, "  trainbot check%s       validate it (every problem with its key and line)\n", flags)
	if job != nil {
		fmt.Fprintf(e.stdout, "  trainbot console%s     the terminal chat: type 开始 to start %s, 状态, 画图, 停止\n", flags, job.name)
	} else {
		fmt.Fprintf(e.stdout, "  edit %s: the [[jobs]] entry (or run trainbot init --force --job ./train.py)\n", path)
	}
	fmt.Fprintf(e.stdout, "  on your phone: export TRAINBOT_TELEGRAM_TOKEN=…, trainbot serve%s, then put the user id the bot tells you in [auth] operators (docs/messengers.md; 企业微信、飞书、钉钉: docs/zh/)\n", flags)
	return exitOK
}

// initJob is the job init writes for a script.
type initJob struct {
	name, dir, script string
	command           []string
	params            []initParam
}

// initParam is a parameter read from the script's argparse.
type initParam struct {
	name, flag, typ, def, help string
}

var (
	jobNameChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)
	jobName      = regexp.MustCompile(`^[A-Za-z0-9._-]+$`) // trainer's rule for a job's name
	// addArgument finds argparse's add_argument("--lr", type=float,
	// default=1e-3, help="…") with a literal number as its default.
	addArgument = regexp.MustCompile(`add_argument\(\s*['"](--[A-Za-z][\w-]*)['"]([^)]*)\)`)
	argType     = regexp.MustCompile(`\btype\s*=\s*(int|float)\b`)
	argDefault  = regexp.MustCompile(`\bdefault\s*=\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(?:,|$)`)
	argHelp     = regexp.MustCompile(`\bhelp\s*=\s*(?:'([^']*)'|"([^"]*)")`)
)

// maxInitParams bounds the parameters init declares from a script.
const maxInitParams = 12

func newInitJob(script, name string, environ []string) (*initJob, error) {
	abs, err := filepath.Abs(script)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, errors.Unwrap(err)
	}
	if st.IsDir() {
		return nil, errors.New("is a directory: give the script the job runs")
	}
	j := &initJob{dir: filepath.Dir(abs), script: abs}
	base := filepath.Base(abs)
	switch ext := filepath.Ext(base); {
	case ext == ".py":
		py := findPython(environ)
		if py == "" {
			return nil, errors.New("no python3 or python on PATH to run it with")
		}
		j.command = []string{py, abs}
		src, _ := os.ReadFile(abs)
		j.params = argparseParams(string(src))
	case ext == ".sh":
		j.command = []string{"bash", abs}
	case st.Mode()&0o111 != 0:
		j.command = []string{abs}
	default:
		return nil, errors.New("not a .py or .sh file and not executable: give a script trainbot can run (or write the job's command by hand)")
	}
	j.name = name
	if j.name == "" {
		j.name = strings.Trim(jobNameChars.ReplaceAllString(strings.TrimSuffix(base, filepath.Ext(base)), "-"), "-.")
		if j.name == "" || strings.IndexFunc(j.name, func(r rune) bool { return r < '0' || r > '9' }) < 0 {
			j.name = "train"
		}
	}
	if !jobName.MatchString(j.name) {
		return nil, fmt.Errorf("--name %q: want letters, digits, '-', '_' or '.'", j.name)
	}
	for _, p := range j.params {
		j.command = append(j.command, p.flag, "{"+p.name+"}")
	}
	return j, nil
}

// findPython is the interpreter of the active virtualenv or conda
// environment when there is one (its bin is first on PATH), else python3,
// else python: absolute, so the job runs with what the user ran init with.
func findPython(environ []string) string {
	path := getenv(environ, "PATH")
	for _, name := range []string{"python3", "python"} {
		for _, dir := range filepath.SplitList(path) {
			if dir == "" {
				continue
			}
			p := filepath.Join(dir, name)
			if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
				return p
			}
		}
	}
	if p, err := exec.LookPath("python3"); err == nil {
		return p
	}
	return ""
}

// argparseParams reads the int and float options of a script's argparse
// that have a literal default: each becomes a parameter with that default,
// so 开始 lr=0.01 works at once and a bare 开始 runs the script as before.
func argparseParams(src string) []initParam {
	var out []initParam
	seen := map[string]bool{}
	for _, m := range addArgument.FindAllStringSubmatch(src, -1) {
		flag, rest := m[1], m[2]
		t, d := argType.FindStringSubmatch(rest), argDefault.FindStringSubmatch(rest)
		if t == nil || d == nil {
			continue
		}
		name := strings.ReplaceAll(strings.TrimPrefix(flag, "--"), "-", "_")
		if seen[name] || len(name) > 64 {
			continue
		}
		if t[1] == "int" {
			if _, err := strconv.ParseInt(d[1], 10, 64); err != nil {
				continue
			}
		}
		seen[name] = true
		p := initParam{name: name, flag: flag, typ: t[1], def: d[1]}
		if h := argHelp.FindStringSubmatch(rest); h != nil {
			p.help = h[1] + h[2]
		}
		out = append(out, p)
		if len(out) == maxInitParams {
			break
		}
	}
	return out
}

// initGPUInfo is what NVML told init of this machine.
type initGPUInfo struct {
	devices []gpu.Device
	reason  string // why there are none
}

func initGPUs(ctx context.Context) initGPUInfo {
	b, err := openGPU()
	if err != nil {
		return initGPUInfo{reason: err.Error()}
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	snap, err := b.Sample(ctx)
	if err != nil {
		return initGPUInfo{reason: err.Error()}
	}
	if len(snap.Devices) == 0 {
		return initGPUInfo{reason: "NVML lists no device"}
	}
	return initGPUInfo{devices: snap.Devices}
}

func (g initGPUInfo) summary() string {
	if len(g.devices) == 0 {
		return "no NVIDIA GPU seen (" + g.reason + "): the job runs without asking for one"
	}
	parts := make([]string, len(g.devices))
	for i, d := range g.devices {
		parts[i] = fmt.Sprintf("%d %s (%s)", d.Index, d.Name, units.Bytes(int64(d.MemTotal)))
	}
	return fmt.Sprintf("%d GPU(s) seen by NVML: %s; the job asks for 1 free GPU per run (gpus = 1)", len(g.devices), strings.Join(parts, ", "))
}

// starterConfig is the config init writes.
func starterConfig(dataDir string, job *initJob, gpus initGPUInfo) string {
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "# trainbot config, written by `trainbot init` on %s, %s.\n", host, time.Now().Format("2006-01-02 15:04"))
	b.WriteString("# Edit it, then `trainbot check` (every problem with its key and line) and\n")
	b.WriteString("# `trainbot console` (the terminal chat: 开始, 状态, 画图, 停止). Every key, its\n")
	b.WriteString("# default and what it does is in the example at the end (commented out) and\n")
	b.WriteString("# in docs/configuration.md.\n\n")
	fmt.Fprintf(&b, "data_dir = %s   # the database, run logs and charts\n\n", strconv.Quote(dataDir))
	b.WriteString("# Who may use the bot from a chat. Telegram: send the bot anything and it\n")
	b.WriteString("# answers with your user id; put it here (or TRAINBOT_AUTH_OPERATORS=…).\n")
	b.WriteString("[auth]\noperators = []   # may start and stop runs\nviewers = []     # may look: status, charts, logs, history\n\n")
	b.WriteString("# Telegram: the token from @BotFather, best through the environment:\n")
	b.WriteString("#   export TRAINBOT_TELEGRAM_TOKEN=123456789:AAH…\n")
	b.WriteString("# WeCom, Feishu, DingTalk (no public IP needed): docs/zh/ and docs/messengers.md.\n\n")
	if len(gpus.devices) > 0 {
		fmt.Fprintf(&b, "# This machine: %s\n", gpus.summary())
	} else {
		fmt.Fprintf(&b, "# This machine: %s.\n", gpus.summary())
	}
	if job == nil {
		b.WriteString("# Your training job: uncomment and edit (trainbot init --force --job ./train.py\n# writes it for a script).\n")
		b.WriteString("# [[jobs]]\n# name = \"train\"\n# command = [\"python3\", \"train.py\", \"--lr\", \"{lr}\"]\n# dir = \"/path/to/project\"\n# [jobs.params.lr]\n# type = \"float\"\n# default = 1e-3\n\n")
	} else {
		b.WriteString("[[jobs]]\n")
		fmt.Fprintf(&b, "name = %s\n", strconv.Quote(job.name))
		fmt.Fprintf(&b, "description = %s\n", strconv.Quote(filepath.Base(job.script)))
		q := make([]string, len(job.command))
		for i, a := range job.command {
			q[i] = strconv.Quote(a)
		}
		fmt.Fprintf(&b, "command = [%s]\n", strings.Join(q, ", "))
		fmt.Fprintf(&b, "dir = %s\n", strconv.Quote(job.dir))
		if len(gpus.devices) > 0 {
			b.WriteString("gpus = 1                 # each run gets a free GPU (CUDA_VISIBLE_DEVICES), or waits for one\n")
		}
		b.WriteString("# checkpoint = \"checkpoints/*.pt\"   # where it saves: a crashed or preempted run resumes from the newest\n")
		for _, p := range job.params {
			fmt.Fprintf(&b, "[jobs.params.%s]\ntype = %q\ndefault = %s\n", p.name, p.typ, p.def)
			if p.help != "" {
				fmt.Fprintf(&b, "help = %s\n", strconv.Quote(p.help))
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("# ---------------------------------------------------------------------------\n")
	b.WriteString("# The example config: every section, commented out. Uncomment what you need.\n")
	b.WriteString("# ---------------------------------------------------------------------------\n")
	for _, line := range strings.Split(strings.TrimRight(root.ExampleConfig, "\n"), "\n") {
		switch {
		case line == "":
			b.WriteString("\n")
		case strings.HasPrefix(line, "#"):
			b.WriteString(line + "\n")
		default:
			b.WriteString("# " + line + "\n")
		}
	}
	return b.String()
}

// writeStarter writes text to path, 0600, through a temporary file; with
// replace the old file is kept as path.bak.
func writeStarter(path, text string, replace bool) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".config-*.toml")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(text); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if replace {
		if _, err := os.Stat(path); err == nil {
			if err := os.Rename(path, path+".bak"); err != nil {
				return err
			}
		}
	} else if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("%s exists", path)
	}
	return os.Rename(tmp.Name(), path)
}
