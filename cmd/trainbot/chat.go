package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/trainbot/trainbot/bot/console"
	"github.com/trainbot/trainbot/bot/transport"
	"github.com/trainbot/trainbot/config"
	"github.com/trainbot/trainbot/gpu"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/internal/private"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/slurm"
)

// configFlags are the flags shared by commands that read a config file.
type configFlags struct {
	config   string
	data     string
	logLevel string
	// explicit makes --config the only way to a config (the demo: a
	// no-setup try does not pick up the config of the user's bot).
	explicit bool
	// from says where config came from: "--config", "TRAINBOT_CONFIG" or
	// "default" (found at DefaultConfigPath); "" when there is none.
	from string
	// looked is set once find has run.
	looked bool
}

func (c *configFlags) register(fs *flag.FlagSet, needConfig bool) {
	help := "config file (TOML); default $TRAINBOT_CONFIG, else " + displayPath(defaultConfigPath(os.Environ()))
	if !needConfig {
		help += " when it exists"
	}
	fs.StringVar(&c.config, "config", "", help)
	fs.StringVar(&c.data, "data", "", "data directory: database, run logs, charts (config data_dir; default $XDG_STATE_HOME/trainbot)")
	fs.StringVar(&c.logLevel, "log-level", "", "debug, info, warn or error (config log_level)")
}

// load builds the configuration: defaults, the file, the environment, the
// flags; then validates it and turns it into each package's options
// (fromConfig). On error it reports every problem at once and returns the
// exit status.
func (c *configFlags) load(e env) (*config.Config, *botConfig, int) {
	if err := c.find(e); err != nil {
		return nil, nil, errorf(e, "%v", err)
	}
	cfg, bc, err := parseConfig(c.config, e.environ, func(cfg *config.Config) {
		if c.data != "" {
			cfg.DataDir = c.data
			// A relative --data is the shell's: made absolute here, as a
			// run's directory must be (demo --data data failed every start).
			if abs, err := filepath.Abs(config.ExpandHome(c.data)); err == nil {
				cfg.DataDir = abs
			}
		}
		if c.logLevel != "" {
			cfg.LogLevel = c.logLevel
		}
	})
	var errs config.Errors
	if errors.As(err, &errs) {
		return nil, nil, reportConfig(e, errs)
	}
	if err != nil {
		return nil, nil, errorf(e, "%v", err)
	}
	// What this command writes (the database's WAL, a chart) is as
	// private as the data directory: its user's, or shared_group's too.
	private.Restrict(bc.sharing.Shared())
	return cfg, bc, exitOK
}

// parseConfig builds the configuration: defaults, the file (none when path
// is ""), the environment, then override (the flags); it validates it and
// turns it into each package's options (fromConfig). Every problem is
// returned at once, as config.Errors sorted by line: decoding errors, then
// what validation finds in the rest.
func parseConfig(path string, environ []string, override func(*config.Config)) (*config.Config, *botConfig, error) {
	cfg := config.DefaultConfig()
	declareTransports(cfg)
	var all config.Errors
	collect := func(err error) error {
		var errs config.Errors
		if errors.As(err, &errs) {
			all = append(all, errs...)
			return nil
		}
		return err
	}
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return nil, nil, fmt.Errorf("read config: %w", err)
		}
		err = cfg.Parse(path, f)
		f.Close()
		if err := collect(err); err != nil {
			return nil, nil, err
		}
	}
	if err := collect(cfg.ApplyEnv(environ)); err != nil {
		return nil, nil, err
	}
	if override != nil {
		override(cfg)
	}
	cfg.DataDir = config.ExpandHome(cfg.DataDir)
	if err := collect(cfg.Validate()); err != nil {
		return nil, nil, err
	}
	bc, errs := fromConfig(cfg, all)
	all = append(all, errs...)
	if len(all) > 0 {
		return nil, nil, all.Sorted()
	}
	bc.configPath = path
	return cfg, bc, nil
}

// reportConfig prints every config error, one per line.
func reportConfig(e env, err error) int {
	var errs config.Errors
	if errors.As(err, &errs) {
		for _, fe := range errs {
			fmt.Fprintln(e.stderr, "trainbot: "+fe.Error())
		}
		fmt.Fprintf(e.stderr, "trainbot: %d config error(s)\n", len(errs))
		return exitFail
	}
	return errorf(e, "%v", err)
}

func cmdConsole(ctx context.Context, args []string, e env) int {
	return chatCommand(ctx, args, e, "console", botOptions{console: true, exitAtEOF: true})
}

func cmdServe(ctx context.Context, args []string, e env) int {
	return chatCommand(ctx, args, e, "serve", botOptions{daemon: true})
}

// chatCommand is console and serve: flags, the config and its jobs, the bot.
func chatCommand(ctx context.Context, args []string, e env, name string, o botOptions) int {
	usage := "--config FILE [--data DIR]"
	if o.mcp {
		usage += " [--http 127.0.0.1:PORT]"
	}
	fs := newFlags(name, usage, e)
	var cf configFlags
	cf.register(fs, true)
	if o.mcp {
		fs.StringVar(&o.mcpHTTP, "http", "", "serve MCP over streamable HTTP on this address instead of stdin/stdout (a token of the runs list, trainbot link, is required)")
	}
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return usageError(fs, e, "unexpected argument %q", pos[0])
	}
	if err := cf.find(e); err != nil {
		return errorf(e, "%v", err)
	}
	if cf.config == "" {
		hint := ""
		if o.console {
			hint = "; or try 'trainbot demo' for the built-in job"
		}
		return usageError(fs, e, "%s%s", noConfig(e.environ), hint)
	}
	cfg, bc, code := cf.load(e)
	if cfg == nil {
		return code
	}
	o.cfg, o.bc = cfg, bc
	o.cli = cliFlags(cf, cfg.DataDir, e.environ)
	if !o.console && !o.mcp {
		o.console = cfg.Console.Enabled
	}
	return startBot(ctx, e, o, nil)
}

// startBot adds the config's jobs to extra (the demo job) and runs the bot.
func startBot(ctx context.Context, e env, o botOptions, extra []*trainer.Job) int {
	o.jobs = append(extra, o.bc.jobs...)
	if o.exitAtEOF {
		if len(o.jobs) == 0 {
			fmt.Fprintln(e.stderr, "trainbot: the config has no [[jobs]]; 开始 will have nothing to start")
		}
		greet(e, o.bc.langs.For(console.Name), len(o.jobs))
	}
	return runBot(ctx, e, o)
}

func cmdCheck(ctx context.Context, args []string, e env) int {
	fs := newFlags("check", "--config FILE", e)
	var cf configFlags
	cf.register(fs, true)
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if cf.config == "" && len(pos) == 1 {
		cf.config = pos[0] // "trainbot check FILE" works too
		pos = nil
	}
	if len(pos) > 0 {
		return usageError(fs, e, "unexpected argument %q", pos[0])
	}
	if err := cf.find(e); err != nil {
		return errorf(e, "%v", err)
	}
	if cf.config == "" {
		return usageError(fs, e, "%s", noConfig(e.environ))
	}
	cfg, bc, code := cf.load(e)
	if cfg == nil {
		return code
	}
	names := make([]string, len(cfg.Jobs))
	for i, j := range cfg.Jobs {
		names[i] = j.Name
	}
	jobs := "no jobs"
	if len(names) > 0 {
		jobs = fmt.Sprintf("%d job(s): %s", len(names), strings.Join(names, ", "))
	}
	fmt.Fprintf(e.stdout, "%s: OK — %s; data_dir %s\n", cf.config, jobs, cfg.DataDir)
	raw, _ := os.ReadFile(cf.config)
	for _, w := range cfg.Warnings(raw) {
		fmt.Fprintln(e.stdout, w)
	}
	for _, j := range bc.jobs {
		if !j.GPUs.Zero() && j.Runner != trainer.RunnerSlurm {
			req := gpu.Request{Count: j.GPUs.Count, Memory: uint64(j.GPUs.Memory), Indices: j.GPUs.Indices}
			fmt.Fprintf(e.stdout, "job %s asks for %s: each start gets free ones (quiet for [gpu] free_for %s, not locked in %s), or waits\n",
				j.Name, req, time.Duration(cfg.GPU.FreeFor), cfg.GPU.LockDir)
		}
		if j.Runner != trainer.RunnerSlurm {
			continue
		}
		if err := slurm.Available(); err != nil {
			fmt.Fprintf(e.stdout, "warning: job %s has runner = \"slurm\", but %v: its runs cannot be submitted from this machine\n", j.Name, err)
		}
		fmt.Fprintf(e.stdout, "job %s runs on Slurm: the data directory %s must be on a filesystem its compute nodes share (the runs write their output there)\n", j.Name, cfg.DataDir)
	}
	if bc.sharing.Shared() {
		fmt.Fprintln(e.stdout, bc.sharing.Note(cfg.DataDir))
	}
	for _, x := range private.Exposures(cfg.DataDir, cf.config, cfg.SecretsInFile(), bc.sharing) {
		fmt.Fprintln(e.stdout, "warning: "+x.String())
	}
	for _, k := range transports {
		if s := transport.SectionOf(cfg, k.Name); s != nil && s.On() && s.Setup() != "" {
			fmt.Fprintf(e.stdout, "[%s] is on; the app needs, in the console: %s\n", k.Name, s.Setup())
		}
	}
	fmt.Fprintln(e.stdout, cfg.Store.RetentionText())
	for _, r := range bc.alerts {
		fmt.Fprintf(e.stdout, "alert rule (every job): %s\n", r)
	}
	for _, j := range bc.jobs {
		for _, r := range j.Alerts {
			fmt.Fprintf(e.stdout, "alert rule (job %s): %s\n", j.Name, r)
		}
	}
	printAlerts(e, bc)
	return exitOK
}

// greet prints the first lines of a terminal chat, in the terminal's
// language.
func greet(e env, l i18n.Lang, jobs int) {
	fmt.Fprintln(e.stdout, l.T(i18n.Greet, jobs))
}
