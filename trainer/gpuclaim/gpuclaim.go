// Package gpuclaim is the trainer's GPUAllocator on a real host: it
// chooses GPUs from the GPU monitor's newest snapshot (gpu.Choose: quiet
// for free_for, not held by a trainbot run, enough free memory, close
// together) and locks them host-wide (internal/gpulock: one lock file per
// GPU UUID that every trainbot on the host honours), so that no GPU is
// given to two runs — of this trainbot, or of a labmate's. The locks go to
// the run's supervisor (trainer.Start hands them to trainer/shimctl),
// which holds them for the run's whole life.
//
// It makes no NVML call of its own: a claim reads the snapshot the monitor
// took (every [gpu] interval) and the lock directory (a few µs per GPU).
package gpuclaim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"strconv"
	"sync"
	"time"

	"github.com/trainbot/trainbot/gpu"
	"github.com/trainbot/trainbot/internal/gpulock"
	"github.com/trainbot/trainbot/trainer"
)

// Options configure an Allocator.
type Options struct {
	// Last is the GPU monitor's newest snapshot (gpu.Monitor.Last).
	Last func() gpu.Snapshot
	// Availability is what the monitor feeds: since when each GPU has
	// been quiet.
	Availability *gpu.Availability
	// Locks is the host-wide lock directory ([gpu] lock_dir).
	Locks *gpulock.Dir
	// FreeFor is how long a GPU must have been quiet ([gpu] free_for).
	FreeFor time.Duration
	// Visible is how the run is told its GPUs: "index" (NVML indices with
	// CUDA_DEVICE_ORDER=PCI_BUS_ID) or "uuid" ([gpu] visible).
	Visible string
	// DataDir is this trainbot's, written into the locks.
	DataDir string
	// Active reports whether a run of this trainbot is still active: the
	// snapshot may be an interval old and still show a run that has just
	// ended on its GPUs. Nil: every run the snapshot shows counts.
	Active func(run int64) bool
	Logger *slog.Logger
}

// Allocator chooses and locks GPUs: a trainer.GPUAllocator.
type Allocator struct {
	opts Options
	user string
	uid  int
	host string
	mu   sync.Mutex // one claim at a time in this trainbot
}

var _ trainer.GPUAllocator = (*Allocator)(nil)

// New returns an Allocator.
func New(opts Options) *Allocator {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	a := &Allocator{opts: opts, uid: os.Getuid()}
	a.host, _ = os.Hostname()
	a.user = strconv.Itoa(a.uid)
	if u, err := user.Current(); err == nil && u.Username != "" {
		a.user = u.Username
	}
	return a
}

// Claim chooses GPUs for req from the newest snapshot and locks them. A
// GPU another trainbot locked between the look and the lock is counted
// taken, and the choice made again.
func (a *Allocator) Claim(ctx context.Context, req trainer.GPURequest, h trainer.GPUHolder) (*trainer.GPUClaim, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	snap := a.snapshot()
	if !snap.Available && snap.At.IsZero() {
		// Before the first sample: every GPU is "not quiet for long
		// enough" anyway; say so rather than "no GPUs".
		return nil, &trainer.GPUShortage{Want: req}
	}
	taken, holdings, err := a.taken()
	if err != nil {
		return nil, err
	}
	greq := gpu.Request{Count: req.Count, Memory: uint64(max(req.Memory, 0)), Indices: req.Indices}
	holder := gpulock.Holder{Job: h.Job, User: a.user, UID: a.uid, DataDir: a.opts.DataDir, Host: a.host}
	for try := 0; ; try++ {
		choice, err := gpu.Choose(snap, a.opts.Availability, greq, taken, a.opts.FreeFor)
		var busy *gpu.BusyError
		switch {
		case errors.As(err, &busy):
			return nil, a.shortage(req, busy, holdings)
		case errors.Is(err, gpu.ErrNoGPUs):
			return nil, fmt.Errorf("%w: %w", trainer.ErrNoGPUs, err) // gpu's facts stay in the chain for the chat
		case err != nil:
			return nil, err
		}
		files, err := gpulock.LockAll(a.opts.Locks, choice.UUIDs(), holder)
		var held *gpulock.HeldError
		// Each refusal marks one more GPU taken, so this ends within as
		// many tries as the host has GPUs: with a choice, or with Choose
		// saying they are not free now.
		if errors.As(err, &held) && try <= len(snap.Devices) {
			a.opts.Logger.Info("a GPU was locked by another trainbot meanwhile; choosing again", "uuid", held.UUID)
			taken[held.UUID] = true
			holdings[held.UUID] = gpulock.Holding{UUID: held.UUID, Holder: held.Holder, Held: !held.Orphan, Orphan: held.Orphan}
			continue
		}
		if err != nil {
			// Held after every try, or a lock file trainbot cannot take (a
			// labmate's file it may not write, a directory of that name):
			// the GPU is not free; the start waits and says why.
			if !errors.As(err, &held) {
				a.opts.Logger.Warn("a GPU's lock cannot be taken", "err", err)
			}
			return nil, &trainer.GPUShortage{Want: req, Cause: err}
		}
		gpus := make([]trainer.RunGPU, len(choice.Devices))
		for i, d := range choice.Devices {
			gpus[i] = trainer.RunGPU{Index: d.Index, UUID: d.UUID, Name: d.Name}
		}
		c := &trainer.GPUClaim{GPUs: gpus, Env: gpu.VisibleEnv(choice.Devices, a.opts.Visible), Locks: files}
		c.Record = func(run int64) {
			for _, f := range files {
				hh := holder
				hh.Run = run
				if err := a.opts.Locks.Update(f, hh); err != nil {
					a.opts.Logger.Warn("record the run in its GPU lock", "run", run, "err", err)
				}
			}
		}
		return c, nil
	}
}

// Met reports whether n GPUs with memory free each could be given to a
// run now, and which (their indices): the question 通知空闲 asks every few
// seconds. It locks nothing.
func (a *Allocator) Met(n int, memory uint64) ([]int, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	snap := a.snapshot()
	if !snap.Available {
		return nil, false
	}
	taken, _, err := a.taken()
	if err != nil {
		return nil, false
	}
	choice, err := gpu.Choose(snap, a.opts.Availability, gpu.Request{Count: n, Memory: memory}, taken, a.opts.FreeFor)
	if err != nil {
		return nil, false
	}
	return choice.Indices(), true
}

// snapshot is the monitor's newest, without the processes of runs of
// this trainbot that have ended since (their GPUs are free once their
// locks are).
func (a *Allocator) snapshot() gpu.Snapshot {
	snap := a.opts.Last()
	if a.opts.Active == nil {
		return snap
	}
	procs := make([]gpu.Process, 0, len(snap.Processes))
	for _, p := range snap.Processes {
		if p.RunID == 0 || a.opts.Active(p.RunID) {
			procs = append(procs, p)
		}
	}
	snap.Processes = procs
	return snap
}

// taken are the GPUs (by UUID) whose lock a trainbot run holds, with what
// each lock says. A lock directory that has gone (a /tmp cleaner) is made
// again.
func (a *Allocator) taken() (map[string]bool, map[string]gpulock.Holding, error) {
	holdings, err := a.opts.Locks.Holders()
	if err != nil {
		d, oerr := gpulock.Open(a.opts.Locks.Path())
		if oerr != nil {
			return nil, nil, fmt.Errorf("GPU locks: %w", err)
		}
		a.opts.Locks = d
		if holdings, err = d.Holders(); err != nil {
			return nil, nil, fmt.Errorf("GPU locks: %w", err)
		}
	}
	taken := map[string]bool{}
	for uuid, hd := range holdings {
		if hd.Taken() {
			taken[uuid] = true
		}
	}
	return taken, holdings, nil
}

// shortage is busy with each taken device's lock holder (a run of
// another trainbot, maybe another user's) beside gpu's facts.
func (a *Allocator) shortage(req trainer.GPURequest, busy *gpu.BusyError, holdings map[string]gpulock.Holding) *trainer.GPUShortage {
	for i := range busy.Devices {
		st := &busy.Devices[i]
		hd, ok := holdings[st.Device.UUID]
		if !st.Taken || len(st.Runs) > 0 || !ok || !hd.Taken() || hd.HolderErr != nil {
			continue
		}
		if hd.Holder.DataDir == a.opts.DataDir && hd.Holder.Run > 0 && !hd.Orphan {
			st.Runs = []int64{hd.Holder.Run} // this trainbot's: the chat names its job and starter
			continue
		}
		user := hd.Holder.User
		if user == "" {
			user = "uid " + strconv.Itoa(hd.Holder.UID)
		}
		st.Lock = &gpu.LockHolder{Run: hd.Holder.Run, Job: hd.Holder.Job, User: user, Host: hd.Holder.Host, Orphan: hd.Orphan}
	}
	return &trainer.GPUShortage{Want: req, Cause: busy}
}

// Refusing is an allocator that refuses every claim with why GPUs cannot
// be shared on this host (a lock directory that is not safe): the start
// is told that, not that there are no GPUs.
func Refusing(why error) trainer.GPUAllocator { return refusing{why} }

type refusing struct{ why error }

func (r refusing) Claim(context.Context, trainer.GPURequest, trainer.GPUHolder) (*trainer.GPUClaim, error) {
	return nil, fmt.Errorf("%w: GPUs cannot be shared on this host: %v", trainer.ErrNoGPUs, r.why)
}
