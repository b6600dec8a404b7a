package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/trainbot/trainbot/config"
	"github.com/trainbot/trainbot/gpu/remote"
	"github.com/trainbot/trainbot/hosts"
	"github.com/trainbot/trainbot/internal/units"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/agent"
)

// hostTargets turns the [[hosts]] entries into hosts' Targets, jumps
// resolved (config has checked they end).
func hostTargets(cfg *config.Config) map[string]*hosts.Target {
	out := map[string]*hosts.Target{}
	var get func(name string) *hosts.Target
	get = func(name string) *hosts.Target {
		if t, ok := out[name]; ok {
			return t
		}
		h := cfg.Host(name)
		if h == nil {
			return nil
		}
		t := &hosts.Target{Name: h.Name, Address: h.Address, User: h.User, IdentityFile: h.IdentityFile,
			KnownHosts: h.KnownHosts, Trainbot: h.Trainbot, DataDir: h.DataDir}
		out[name] = t
		if h.Jump != "" {
			t.Jump = get(h.Jump)
		}
		return t
	}
	for _, h := range cfg.Hosts {
		get(h.Name)
	}
	return out
}

// hostOptions are the connections' options: the ssh-agent of the
// environment.
func hostOptions(e env) hosts.Options {
	var o hosts.Options
	for _, kv := range e.environ {
		if v, ok := strings.CutPrefix(kv, "SSH_AUTH_SOCK="); ok {
			o.AgentSocket = v
		}
	}
	return o
}

// openHosts starts one connection per [[hosts]] entry: each dials in the
// background (and again, with the one backoff, whenever it is lost), so
// that a host that does not answer delays nothing else.
func (b *bot) openHosts() int {
	if len(b.cfg.Hosts) == 0 {
		return exitOK
	}
	o := hostOptions(b.e)
	o.Log = b.log.With("component", "hosts")
	b.hosts, b.links = map[string]*hosts.Host{}, map[string]trainer.RemoteHost{}
	g := b.cfg.GPU
	settings := agent.GPUSettings{Interval: time.Duration(g.Interval), BusyMemory: int64(g.BusyMemory), BusyUtil: g.BusyUtil,
		FreeFor: time.Duration(g.FreeFor), Visible: g.Visible, LockDir: g.LockDir}
	var links []*agent.Link
	for name, t := range hostTargets(b.cfg) {
		h := &hosts.Host{Target: t, Opts: o, Hub: thisVersion()}
		h.Start(context.WithoutCancel(b.ctx))
		b.hosts[name] = h
		l := &agent.Link{Host: h, Hub: trainer.DefaultHubName(b.cfg.DataDir), GPU: settings, Logger: o.Log}
		links = append(links, l)
		b.links[name] = l
	}
	b.life.opened("close the hosts' connections", func() error {
		for _, l := range links {
			l.Close()
		}
		for _, h := range b.hosts {
			h.Close()
		}
		return nil
	})
	return exitOK
}

// openHostGPUs samples the [[hosts]]' GPUs over their connections every
// [gpu] interval, for 显卡 and the GPU alerts (with the host's name).
func (b *bot) openHostGPUs() int {
	if len(b.hosts) == 0 {
		return exitOK
	}
	var hs []*hosts.Host
	for _, h := range b.cfg.Hosts {
		hs = append(hs, b.hosts[h.Name])
	}
	s := remote.New(remote.Options{Hosts: hs, Interval: time.Duration(b.cfg.GPU.Interval), Thresholds: gpuThresholds(b.cfg.GPU),
		Alert: b.notifier.GPUAlert, Logger: b.log.With("component", "hostgpus")})
	s.Start()
	b.life.opened("stop sampling the hosts' GPUs", func() error { s.Close(); return nil })
	b.router.HostGPUs = s
	return exitOK
}

const hostsUsage = `Usage: trainbot hosts check --config FILE [NAME…]
       trainbot hosts install --config FILE [--force] NAME

The [[hosts]] of FILE are GPU servers reached over SSH (docs/hosts.md).
check: for each host (or those named), one line per check —
reach, host key, the remote trainbot's version and protocol, NVML, free disk
of the remote data directory; exit 1 when any host fails. install: copy this
trainbot to the host's trainbot path when the one there is missing, older or
of another protocol.`

func cmdHosts(ctx context.Context, args []string, e env) int {
	if len(args) == 0 {
		fmt.Fprintln(e.stderr, hostsUsage)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(e.stdout, hostsUsage)
		return exitOK
	case "check":
		return cmdHostsCheck(ctx, args[1:], e)
	case "install":
		return cmdHostsInstall(ctx, args[1:], e)
	}
	fmt.Fprintf(e.stderr, "trainbot hosts: unknown subcommand %q: want check or install\n", args[0])
	return exitUsage
}

// loadHosts loads the config and picks the named hosts (all of them
// when names is empty).
func loadHosts(e env, cf *configFlags, names []string) ([]*hosts.Target, int) {
	cfg, _, code := cf.load(e)
	if cfg == nil {
		return nil, code
	}
	if len(cfg.Hosts) == 0 {
		return nil, errorf(e, "%s has no [[hosts]] entry (docs/hosts.md)", cf.config)
	}
	targets := hostTargets(cfg)
	var out []*hosts.Target
	if len(names) == 0 {
		for _, h := range cfg.Hosts {
			out = append(out, targets[h.Name])
		}
	}
	for _, n := range names {
		t, ok := targets[n]
		if !ok {
			var known []string
			for _, h := range cfg.Hosts {
				known = append(known, h.Name)
			}
			return nil, errorf(e, "no host %q in %s: the hosts are %s", n, cf.config, strings.Join(known, ", "))
		}
		out = append(out, t)
	}
	return out, exitOK
}

func cmdHostsCheck(ctx context.Context, args []string, e env) int {
	fs := newFlags("hosts check", "[--config FILE] [NAME…]", e)
	var cf configFlags
	cf.register(fs, true)
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if err := cf.find(e); err != nil {
		return errorf(e, "%v", err)
	}
	if cf.config == "" {
		return usageError(fs, e, "%s: the [[hosts]] are in the config file", noConfig(e.environ))
	}
	targets, code := loadHosts(e, &cf, pos)
	if targets == nil {
		return code
	}
	hub, o := thisVersion(), hostOptions(e)
	failed := 0
	for _, t := range targets {
		r := hosts.Check(ctx, t, o, hub)
		printReport(e, t, r)
		if !r.OK() {
			failed++
		}
	}
	if failed > 0 {
		fmt.Fprintf(e.stdout, "%d of %d hosts failed\n", failed, len(targets))
		return exitFail
	}
	return exitOK
}

// printReport writes one line per check: host, check, ok/FAIL/skip, what.
func printReport(e env, t *hosts.Target, r hosts.Report) {
	line := func(check string, err error, format string, args ...any) {
		status, what := "ok", fmt.Sprintf(format, args...)
		switch {
		case errors.Is(err, hosts.ErrSkipped):
			status, what = "skip", "(an earlier check failed)"
		case err != nil:
			status, what = "FAIL", err.Error()
		}
		fmt.Fprintf(e.stdout, "%-12s %-9s %-4s %s\n", t.Name, check, status, strings.ReplaceAll(what, "\n", "\n"+strings.Repeat(" ", 28)))
	}
	via := ""
	if t.Jump != nil {
		via = " via " + t.Jump.Name
	}
	var he *hosts.HostKeyError
	switch {
	case errors.As(r.DialErr, &he):
		line("reach", nil, "%s%s: the server answered", t.Address, via)
		line("host key", he, "")
	case r.DialErr != nil:
		line("reach", r.DialErr, "")
		line("host key", hosts.ErrSkipped, "")
	default:
		line("reach", nil, "%s%s as %s in %s", t.Address, via, t.User, r.DialTime.Round(100*time.Microsecond))
		line("host key", nil, "%s %s (in %s)", r.HostKeyType, r.HostKeyFingerprint, t.KnownHosts)
	}
	if r.DialErr != nil {
		for _, c := range []string{"trainbot", "nvml", "disk"} {
			line(c, hosts.ErrSkipped, "")
		}
		return
	}
	line("trainbot", r.TrainbotErr, "%s %s", t.Trainbot, r.Trainbot)
	g := r.GPU
	switch {
	case r.GPUErr != nil:
		line("nvml", r.GPUErr, "")
	case !g.Available:
		line("nvml", nil, "no GPUs: %s", firstNonEmpty(g.Reason, g.Error, "NVML unavailable"))
	default:
		var names []string
		for _, d := range g.Devices {
			names = append(names, fmt.Sprintf("%d %s %s", d.Index, d.Name, units.Bytes(int64(d.MemoryTotalBytes))))
		}
		line("nvml", nil, "%d GPUs, driver %s: %s", len(g.Devices), g.Driver, strings.Join(names, "; "))
	}
	line("disk", r.DiskErr, "%s free in %s", units.Bytes(r.Free), r.DataDir)
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

func cmdHostsInstall(ctx context.Context, args []string, e env) int {
	fs := newFlags("hosts install", "[--config FILE] [--force] NAME", e)
	var cf configFlags
	cf.register(fs, true)
	force := fs.Bool("force", false, "replace the remote trainbot even when it is the same, newer or cannot be compared")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if err := cf.find(e); err != nil {
		return errorf(e, "%v", err)
	}
	if cf.config == "" {
		return usageError(fs, e, "%s: the [[hosts]] are in the config file", noConfig(e.environ))
	}
	if len(pos) != 1 {
		return usageError(fs, e, "want the name of one host")
	}
	targets, code := loadHosts(e, &cf, pos)
	if targets == nil {
		return code
	}
	t := targets[0]
	local := thisVersion()
	c, err := hosts.Dial(ctx, t, hostOptions(e))
	if err != nil {
		return errorf(e, "%v", err)
	}
	defer c.Close()
	remote, rerr := c.RemoteVersion(ctx)
	need := hosts.Decide(local, remote, rerr, *force)
	var was string
	switch need {
	case hosts.NeedSame:
		fmt.Fprintf(e.stdout, "%s already has this trainbot (%s) at %s: nothing to do\n", t.Name, remote, t.Trainbot)
		return exitOK
	case hosts.NeedNewer:
		fmt.Fprintf(e.stdout, "%s has a newer trainbot (%s) than this one (%s): not replaced (--force replaces it)\n", t.Name, remote, local)
		return exitOK
	case hosts.NeedUnknown:
		return errorf(e, "cannot tell which is newer: %s has trainbot %s, this one is %s; --force replaces it", t.Name, remote, local)
	case hosts.NeedMissing:
		was = "there was none"
		if rerr != nil && !errors.Is(rerr, hosts.ErrNoTrainbot) {
			was = "the one there did not answer: " + rerr.Error()
		}
	case hosts.NeedProtocol:
		was = fmt.Sprintf("it had %s, another protocol", remote)
	case hosts.NeedOlder:
		was = fmt.Sprintf("it had the older %s", remote)
	case hosts.NeedForced:
		was = "--force"
		if rerr == nil {
			was += fmt.Sprintf("; it had %s", remote)
		}
	}
	began := time.Now()
	path, err := c.Install(ctx, e.exe)
	if err != nil {
		return errorf(e, "%v", err)
	}
	took := time.Since(began)
	now, err := c.RemoteVersion(ctx)
	if err == nil {
		err = hosts.CheckVersion(t.Name, local, now)
	}
	if err != nil {
		return errorf(e, "installed at %s on %s, but: %v", path, t.Name, err)
	}
	fmt.Fprintf(e.stdout, "installed trainbot %s at %s on %s in %s (%s)\n", now, path, t.Name, took.Round(time.Millisecond), was)
	return exitOK
}
