// Command trainbot starts, stops and watches deep-learning training runs from
// a chat: the terminal (`trainbot demo`, `trainbot console`) or the chat
// transports of a config file (`trainbot serve`). It also reads the history
// (`trainbot runs`, `trainbot plot`, `trainbot points`) and checks config files
// (`trainbot check`).
//
// Only main calls os.Exit; every subcommand returns an exit status:
// 0 success, 1 failure, 2 usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/trainbot/trainbot/internal/private"
	"github.com/trainbot/trainbot/trainer/shim"
)

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// env is what a subcommand may touch of the outside world.
type env struct {
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
	environ []string
	// exe is the program to run for the demo child ("trainbot demo-train").
	exe string
}

func main() {
	// A run's supervisor (`trainbot shim`, which a Supervisor starts for
	// each run) is entered first: it installs its own signal handling and
	// owns the process from here.
	shim.MainIfAsked()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	code := run(ctx, os.Args[1:], env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, environ: os.Environ(), exe: exe})
	stop()
	os.Exit(code)
}

type subcommand struct {
	name    string
	summary string
	hidden  bool
	run     func(ctx context.Context, args []string, e env) int
}

func subcommands() []subcommand {
	return []subcommand{
		{name: "demo", summary: "the terminal chat with the built-in demo job (no GPU, no token needed)", run: cmdDemo},
		{name: "init", summary: "write a starter config (~/.config/trainbot/config.toml): init --job ./train.py", run: cmdInit},
		{name: "console", summary: "the terminal chat with the jobs of a config file", run: cmdConsole},
		{name: "mcp", summary: "the Model Context Protocol server for coding agents (stdin/stdout)", run: cmdMCP},
		{name: "serve", summary: "run the bot with the transports of a config file", run: cmdServe},
		{name: "check", summary: "validate a config file", run: cmdCheck},
		{name: "runs", summary: "list runs, or show one: runs show ID", run: cmdRuns},
		{name: "plot", summary: "draw a run's loss, memory or utilisation chart to a PNG file", run: cmdPlot},
		{name: "points", summary: "print a run's stored metric points (step, time, name, value) as a table, --csv or --json", run: cmdPoints},
		{name: "compare", summary: "compare runs: a table, their loss curves and their memory overlaid", run: cmdCompare},
		{name: "fit", summary: "which batch size fits: peak memory of a job's runs fitted against a parameter", run: cmdFit},
		{name: "link", summary: "print a signed link to a run's web page (or, without ID, the runs list)", run: cmdLink},
		{name: "reload", summary: "make the running trainbot serve re-read its config (SIGHUP)", run: cmdReload},
		{name: "watch", summary: "watch a run trainbot did not start: its log and its process", run: cmdWatch},
		{name: "queue", summary: "the start requests waiting for their job's lock (排队)", run: cmdQueue},
		{name: "audit", summary: "who sent which command to the chats, allowed or refused, and the run it touched", run: cmdAudit},
		{name: "gpu", summary: "GPUs and which runs hold their memory (host memory without a GPU)", run: cmdGPU},
		{name: "parse", summary: "show the metrics trainbot reads from a log: parse [--json] < LOG", run: cmdParse},
		{name: "hosts", summary: "the GPU servers over SSH: hosts check [NAME…] (reach, host key, trainbot, NVML, disk); hosts install NAME", run: cmdHosts},
		{name: "version", summary: "print the version, the VCS revision, whether the tree was modified and the protocol (--json)", run: cmdVersion},
		{name: "demo-train", summary: "the demo training itself (run by trainbot as a child)", hidden: true, run: cmdDemoTrain},
		{name: "agent", summary: "the host's side of a hub's runs (started by the hub over SSH)", hidden: true, run: cmdAgent},
		{name: "shim", summary: "the per-run supervisor (started by trainbot)", hidden: true,
			run: func(_ context.Context, args []string, e env) int { return shim.Main(args, e.stderr) }},
	}
}

func run(ctx context.Context, args []string, e env) int {
	if len(args) == 0 {
		usage(e.stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		usage(e.stdout)
		return exitOK
	case "-v", "--version":
		name = "version"
	}
	for _, c := range subcommands() {
		if c.name == name {
			if !c.hidden {
				// What trainbot writes is its user's alone (internal/private);
				// the shim inherits this, the demo child keeps the user's.
				// Loading a config with [store] shared_group widens it to the
				// group.
				private.Restrict(false)
			}
			return c.run(ctx, args[1:], e)
		}
	}
	fmt.Fprintf(e.stderr, "trainbot: unknown command %q\n\n", name)
	usage(e.stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "trainbot: start, stop and watch training runs from a chat.")
	fmt.Fprintln(w, "\nUsage: trainbot COMMAND [flags]")
	fmt.Fprintln(w, "\nCommands:")
	for _, c := range subcommands() {
		if !c.hidden {
			fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
		}
	}
	fmt.Fprintln(w, "\nRun 'trainbot COMMAND -h' for the flags of a command.")
	fmt.Fprintln(w, "Try it: go run ./cmd/trainbot demo   then type 开始, 状态, 画图, 停止.")
}

// newFlags returns a flag set that reports errors instead of exiting.
func newFlags(name, args string, e env) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "Usage: trainbot %s %s\n\nFlags:\n", name, args)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses flags anywhere among the arguments ("runs show 3 --json")
// and returns the positional arguments. ok is false after a usage error
// (already reported); help is true after -h.
func parseFlags(fs *flag.FlagSet, args []string) (pos []string, code int, ok bool) {
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, exitOK, false
			}
			return nil, exitUsage, false
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, 0, true
		}
		if rest[0] == "--" {
			return append(pos, rest[1:]...), 0, true
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// usageError reports a bad argument and returns the usage status.
func usageError(fs *flag.FlagSet, e env, format string, args ...any) int {
	fmt.Fprintf(e.stderr, "trainbot %s: %s\n", fs.Name(), fmt.Sprintf(format, args...))
	fs.Usage()
	return exitUsage
}

func errorf(e env, format string, args ...any) int {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintln(e.stderr, "trainbot: "+strings.TrimRight(msg, "\n"))
	return exitFail
}
