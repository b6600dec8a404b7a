package trainer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/trainbot/trainbot/internal/termsafe"
	"github.com/trainbot/trainbot/trainer/shimctl"
)

// HostsAny as a job's only host is every configured host.
const HostsAny = "any"

// ErrNoHost is wrapped by the error of a start on a host that is not
// configured, or not one of the job's.
var ErrNoHost = errors.New("no such host")

// DefaultHubName is this trainbot's name on the hosts: the machine's name
// and a short hash of its data directory, so that two trainbots of one
// machine never share a host's run directory.
func DefaultHubName(dataDir string) string {
	name, err := os.Hostname()
	if err != nil || !hubName.MatchString(name) {
		name = "hub"
	}
	abs, _ := filepath.Abs(dataDir)
	sum := sha256.Sum256([]byte(abs))
	return name + "-" + hex.EncodeToString(sum[:4])
}

// runHosts are the hosts a start may run on, in the order they are
// tried: the one asked (开始 job@host), else the job's; nil for this host.
func (s *Supervisor) runHosts(job *Job, asked string) ([]string, error) {
	all := slices.Sorted(maps.Keys(s.opts.Hosts))
	names := job.Hosts
	if len(names) == 1 && names[0] == HostsAny {
		names = all
	}
	if asked == "" {
		return names, nil
	}
	if _, ok := s.opts.Hosts[asked]; !ok {
		if len(all) == 0 {
			return nil, fmt.Errorf("%w: %q (this trainbot has no [[hosts]])", ErrNoHost, asked)
		}
		return nil, fmt.Errorf("%w: %q (the hosts are %s)", ErrNoHost, asked, strings.Join(all, ", "))
	}
	if len(job.Hosts) > 0 && !slices.Contains(names, asked) {
		return nil, fmt.Errorf("%w: job %s runs on %s, not on %s", ErrNoHost, job.Name, strings.Join(names, ", "), asked)
	}
	return []string{asked}, nil
}

// hostRefusal is why one host did not take a start.
type hostRefusal struct {
	host string
	err  error
}

// startRemote starts a run on the first of hosts that takes it: its job's
// lock and GPUs are the host's own, claimed there. lock is the job's lock
// here, held: it goes to the run's observer, or is released.
func (s *Supervisor) startRemote(ctx context.Context, job *Job, req StartRequest, params map[string]string, gpuReq GPURequest, lock *fileLock, hosts []string) (*Run, error) {
	handed := false
	defer func() {
		if !handed {
			lock.release()
		}
	}()
	ctx = context.WithoutCancel(ctx)
	argv, env := job.Argv(params)
	if job.OnFailure != nil {
		argv = job.withCheckpoint(argv, params, req.Checkpoint)
		if req.Checkpoint != "" {
			env = append(env, EnvCheckpoint+"="+req.Checkpoint)
		}
	}
	id := s.nextID()
	spec := RemoteSpec{Hub: s.opts.HubName, RunID: id, Job: job.Name, Lock: job.Lock, Argv: argv, Dir: job.Dir, Env: env,
		StopGrace: job.StopGrace, KillGrace: job.KillGrace, DrainTimeout: s.opts.DrainTimeout, MaxLogBytes: job.MaxLogBytes, GPUs: gpuReq,
		StopSignal: int(job.Signals.Stop)}
	var refused []hostRefusal
	var started *RemoteStarted
	var host string
	for _, name := range hosts {
		h := s.opts.Hosts[name]
		if h == nil {
			refused = append(refused, hostRefusal{name, ErrNoHost})
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 45*time.Second)
		st, err := h.Start(cctx, spec)
		cancel()
		if err == nil {
			started, host = st, name
			break
		}
		s.log.Info("host did not take the run", "host", name, "job", job.Name, "err", err)
		refused = append(refused, hostRefusal{name, err})
		if errors.Is(err, shimctl.ErrNotStarted) {
			break // the command itself: another host would not do better
		}
	}
	now := time.Now()
	run := &Run{
		ID: id, Job: job.Name, Params: params, ParamTypes: job.paramTypes(), ParamRanges: job.paramRanges(), State: StateRunning, Outcome: OutcomeRunning, Runner: RunnerSSH,
		StartedAt: now, StartedBy: req.By, Origin: req.Origin, RetryOf: req.RetryOf, Note: req.Note, Command: argv, ResumedFrom: req.ResumedFrom,
	}
	if started == nil {
		last := refused[len(refused)-1]
		if errors.Is(last.err, shimctl.ErrNotStarted) {
			// The command could not be started there: a failed run, as here.
			run.Host = last.host
			return s.failRemote(ctx, run, last.err)
		}
		return nil, remoteRefusal(gpuReq, refused)
	}
	run.Host, run.RemoteDir, run.PID, run.Supervisor, run.GPUs = host, started.RunDir, started.PID, started.ShimPID, started.GPUs
	s.minID.Store(max(s.minID.Load(), id))
	rid, err := s.opts.Recorder.CreateRun(ctx, run)
	if err != nil {
		s.stopUnrecorded(host, started, err)
		return nil, fmt.Errorf("record run: %w", err)
	}
	run.ID = rid
	s.minID.Store(max(s.minID.Load(), rid+1))
	log := s.log.With("run", rid, "job", job.Name, "host", host)
	runDir := RunDir(s.opts.DataDir, rid)
	run.LogPath = filepath.Join(runDir, shimctl.LogFile)
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		s.stopUnrecorded(host, started, err)
		return s.failRemote(ctx, run, err)
	}
	if err := s.opts.Recorder.UpdateRun(ctx, run); err != nil {
		log.Error("record the run's host", "err", err)
	}
	if err := writeRunFile(runDir, run); err != nil {
		log.Error("write the run's record in its directory", "err", err)
	}
	obs, err := acquireObserver(runDir)
	if err != nil {
		s.stopUnrecorded(host, started, err)
		return s.failRemote(ctx, run, err)
	}
	lock.describe(lockHolder{What: fmt.Sprintf("run #%d (%s) on host %s, observed by trainbot pid %d", rid, job.Name, host, os.Getpid())})
	handed = true
	a := newActive(s, job, run, runDir)
	a.runner = newRemoteRunner(a, s.opts.Hosts[host], lock)
	a.obs, a.attempt, a.prevOOM, a.prevSteps, a.queued = obs, req.attempt, req.prevOOM, req.prevSteps, req.queued
	a.resumeAttempt, a.resumedAtStep, a.resumedFrom = req.resumeAttempt, req.resumedAtStep, req.Checkpoint
	log.Info("run started on its host", "pid", started.PID, "supervisor", started.ShimPID, "dir", started.RunDir, "argv", termsafe.Argv(argv), "gpus", GPUList(started.GPUs))
	return s.register(a), nil
}

// failRemote records a run that could not start on its host.
func (s *Supervisor) failRemote(ctx context.Context, run *Run, err error) (*Run, error) {
	if run.ID == 0 || run.LogPath == "" {
		id, rerr := s.recordRun(ctx, run)
		if rerr != nil {
			return nil, rerr
		}
		run.ID, run.LogPath = id, filepath.Join(RunDir(s.opts.DataDir, id), shimctl.LogFile)
	}
	run.State, run.Outcome, run.EndedAt = StateEnded, OutcomeFailed, time.Now()
	run.End = &EndFacts{Why: WhyNoStart, StartError: fmt.Sprintf("on host %s: %v", run.Host, err)}
	run.Detail = run.End.English()
	if uerr := s.opts.Recorder.UpdateRun(ctx, run); uerr != nil {
		s.log.Error("record failed start", "run", run.ID, "err", uerr)
	}
	s.log.Warn("run could not start on its host", "run", run.ID, "host", run.Host, "err", err)
	s.publish(Event{Kind: EventEnded, Run: run.Clone(), Status: &Status{Run: run.Clone(), Progress: emptyProgress()}})
	return run.Clone(), &StartError{Run: run.Clone(), Err: err}
}

// stopUnrecorded kills a run a host started that this trainbot could not
// record: nobody would observe it.
func (s *Supervisor) stopUnrecorded(host string, st *RemoteStarted, why error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.opts.Hosts[host].Stop(ctx, RemoteRef{RunDir: st.RunDir, PID: st.PID, ShimPID: st.ShimPID}, RemoteStop{By: "trainbot (the run could not be recorded: " + why.Error() + ")", Kill: true})
	if err != nil {
		s.log.Error("kill a run that could not be recorded on its host", "host", host, "dir", st.RunDir, "err", err)
	}
}

// remoteRefusal is the error of a start no host took: a *BusyError when
// each was busy (its lock, or its GPUs: the queue tries again), else every
// host's reason.
func remoteRefusal(want GPURequest, refused []hostRefusal) error {
	var gpus, locks, never, other []string
	for _, r := range refused {
		var b *BusyError
		var sh *GPUShortage
		switch {
		case errors.As(r.err, &b) && b.GPUs != nil:
			gpus = append(gpus, r.host+": "+b.GPUs.Error())
		case errors.As(r.err, &b):
			locks = append(locks, r.host+": "+b.Other)
		case errors.As(r.err, &sh):
			gpus = append(gpus, r.host+": "+sh.Error())
		case errors.Is(r.err, ErrNoGPUs):
			never = append(never, r.host+": "+strings.TrimPrefix(r.err.Error(), ErrNoGPUs.Error()+": "))
		default:
			other = append(other, r.host+": "+r.err.Error())
		}
	}
	switch {
	case len(other) > 0:
		return fmt.Errorf("no host took the run: %s", strings.Join(slices.Concat(other, gpus, locks, never), "; "))
	case len(gpus) > 0:
		return &BusyError{GPUs: &GPUShortage{Want: want, Cause: errors.New(strings.Join(slices.Concat(gpus, locks, never), "; "))}}
	case len(locks) > 0:
		return &BusyError{Other: strings.Join(slices.Concat(locks, never), "; ")}
	}
	return fmt.Errorf("%w: %s", ErrNoGPUs, strings.Join(never, "; "))
}

// missingHost is the host of a run this trainbot has no [[hosts]] entry
// for (any more): the run is shown, and its host as not answering.
type missingHost struct{ name string }

func (m missingHost) err() error {
	return fmt.Errorf("%w: %q is not in the config's [[hosts]] (any more)", ErrNoHost, m.name)
}
func (m missingHost) Start(context.Context, RemoteSpec) (*RemoteStarted, error) { return nil, m.err() }
func (m missingHost) Status(context.Context, RemoteRef) (*RemoteStatus, error)  { return nil, m.err() }
func (m missingHost) Stop(context.Context, RemoteRef, RemoteStop) error         { return m.err() }
func (m missingHost) Read(context.Context, RemoteRef, string, int64, int) ([]byte, error) {
	return nil, m.err()
}
func (m missingHost) Checkpoint(context.Context, string, string) (string, error) { return "", m.err() }
