package trainer

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/trainbot/trainbot/trainer/shimctl"
)

// remoteRunner is the runner of a run on another host: its shim there,
// reached through the host's trainbot (RemoteHost). A goroutine of its own
// (link) asks the host how the run is and copies what the run's files
// gained into the mirror — the run's directory here, which the observer
// reads as it reads a local run's — so that the observer never waits on
// the network: poll answers from what link last learnt.
type remoteRunner struct {
	host     RemoteHost
	hostName string
	ref      RemoteRef
	runDir   string // the mirror
	maxLog   int64
	// The job's grace periods, for orphans the host's shim left.
	stopGrace, killGrace time.Duration
	lock                 *fileLock // the job's lock here, held by the observer for the run's life
	log                  *slog.Logger

	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu         sync.Mutex
	st         *RemoteStatus // the host's last word; nil before one
	complete   bool          // it ended there and the mirror has all of it
	grew       time.Time     // when the mirror last grew
	lostAt     time.Time     // since when the host has not answered; zero while it does
	lostErr    error
	warned     bool      // the loss was told
	down       time.Time // when the shim was first told gone; zero otherwise
	orphans    bool      // told unsupervised
	orphanStop orphanStop
	goneAt     time.Time
}

// Pace of the mirror.
const (
	remotePoll  = 200 * time.Millisecond // between two looks while nothing is new
	remoteChunk = 1 << 20                // bytes asked per read
	remoteCall  = 15 * time.Second       // bound of one call to the host
	remoteRetry = 2 * time.Second        // between two tries while the host does not answer
	// remoteLostTold is how long a host may not answer before the run's
	// chats are told (once).
	remoteLostTold = 30 * time.Second
)

// newRemoteRunner starts the mirror of a run on a host.
func newRemoteRunner(a *active, host RemoteHost, lock *fileLock) *remoteRunner {
	r := &remoteRunner{host: host, hostName: a.run.Host, ref: RemoteRef{RunDir: a.run.RemoteDir, PID: a.run.PID, ShimPID: a.run.Supervisor},
		runDir: a.runDir, maxLog: a.job.MaxLogBytes, stopGrace: a.job.StopGrace, killGrace: a.job.KillGrace, lock: lock,
		orphanStop: orphanStop{first: a.job.Signals.Stop}, log: a.log.With("host", a.run.Host), grew: time.Now()}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.link(ctx)
	}()
	return r
}

// mirrored are the files copied, the index first: lines the log mirror
// has that the index mirror does not cover yet get the time they were
// copied, which is close only for lines just written.
var mirrored = []string{shimctl.IndexFile, shimctl.LogFile, MetricsFile}

// link keeps the mirror until the run has ended there and all of it is
// here, or until done.
func (r *remoteRunner) link(ctx context.Context) {
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, remoteCall)
		st, err := r.host.Status(cctx, r.ref)
		var got int64
		if err == nil {
			got, err = r.pull(cctx, st)
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		r.mu.Lock()
		if err != nil {
			if r.lostAt.IsZero() {
				r.lostAt = now
				r.log.Warn("the run's host does not answer; the run goes on there", "err", err)
			}
			r.lostErr = err
			r.mu.Unlock()
			sleep(ctx, remoteRetry)
			continue
		}
		if !r.lostAt.IsZero() {
			r.log.Info("the run's host answers again", "after", now.Sub(r.lostAt).Round(time.Millisecond))
		}
		r.lostAt, r.lostErr, r.warned, r.st = time.Time{}, nil, false, st
		if got > 0 {
			r.grew = now
		}
		if st.State != nil && st.State.Ended && r.have(st) {
			r.complete = true
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		if got == 0 {
			sleep(ctx, remotePoll)
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// size is the mirror's size of one file.
func (r *remoteRunner) size(name string) int64 {
	fi, err := os.Stat(filepath.Join(r.runDir, name))
	if err != nil {
		return 0
	}
	return fi.Size()
}

// have reports whether the mirror has every byte st counts.
func (r *remoteRunner) have(st *RemoteStatus) bool {
	for _, name := range mirrored {
		if r.size(name) < st.sizeOf(name) {
			return false
		}
	}
	return true
}

// sizeOf is the size the host told of one of the mirrored files.
func (st *RemoteStatus) sizeOf(name string) int64 {
	switch name {
	case shimctl.IndexFile:
		return st.IndexSize
	case shimctl.LogFile:
		return st.LogSize
	case MetricsFile:
		return st.MetricsSize
	}
	return 0
}

// pull copies what each file gained, up to the sizes st tells, in
// chunks; it returns the bytes copied.
func (r *remoteRunner) pull(ctx context.Context, st *RemoteStatus) (int64, error) {
	var total int64
	for _, name := range mirrored {
		want, have := st.sizeOf(name), r.size(name)
		if have >= want {
			continue
		}
		f, err := os.OpenFile(filepath.Join(r.runDir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return total, fmt.Errorf("the run's mirror: %w", err)
		}
		for have < want {
			b, err := r.host.Read(ctx, r.ref, name, have, int(min(want-have, remoteChunk)))
			if err == nil && len(b) == 0 {
				err = fmt.Errorf("%s on %s ends at %d bytes, not %d", name, r.hostName, have, want)
			}
			if err != nil {
				f.Close()
				return total, err
			}
			if name == shimctl.IndexFile {
				b = b[:len(b)/shimctl.IndexRecordSize*shimctl.IndexRecordSize] // whole records only
				if len(b) == 0 {
					break
				}
			}
			if _, err := f.Write(b); err != nil {
				f.Close()
				return total, fmt.Errorf("the run's mirror: %w", err)
			}
			have += int64(len(b))
			total += int64(len(b))
		}
		if err := f.Close(); err != nil {
			return total, fmt.Errorf("the run's mirror: %w", err)
		}
	}
	return total, nil
}

func (r *remoteRunner) poll(now time.Time) (*runEnd, runLive, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	live := runLive{lastOutput: r.grew}
	if !r.lostAt.IsZero() {
		// A host that does not answer says nothing of its run: it is not
		// taken for a hang.
		live.lastOutput = now
		if !r.warned && now.Sub(r.lostAt) >= remoteLostTold {
			r.warned = true
			live.warn = fmt.Sprintf("host %s has not answered since %s (%v): the run goes on there; what it prints meanwhile is read when the host answers again",
				r.hostName, r.lostAt.Format("15:04:05"), r.lostErr)
		}
		return nil, live, false
	}
	st := r.st
	if st == nil {
		return nil, live, false
	}
	if st.State != nil {
		live.dropped = st.State.BytesDropped
	}
	if r.complete {
		// The stop's by: the host's trainbot asked its shim, so the shim
		// vouches for what the hub sent.
		end := (&shimRunner{maxLog: r.maxLog}).end(st.State)
		return end, live, false
	}
	if st.Shim != ShimGone || (st.State != nil && st.State.Ended) {
		r.down = time.Time{}
		return nil, live, false
	}
	if r.down.IsZero() {
		r.down = now
		r.log.Warn("the run's supervisor on its host is gone", "pid", r.ref.ShimPID)
	}
	if now.Sub(r.down) < shimGoneWait || st.Processes < 0 {
		return nil, live, false
	}
	if st.Processes == 0 {
		if r.goneAt.IsZero() {
			r.goneAt = r.down
		}
		return nil, live, true
	}
	if !r.orphans {
		r.orphans = true
		live.unsupervised = &Unsupervised{SupervisorPID: r.ref.ShimPID, PGID: r.ref.PID, Processes: st.Processes}
		r.log.Warn("the run's supervisor on its host died; processes of the run live on unsupervised", "processes", st.Processes)
	}
	r.escalate(now)
	return nil, live, false
}

// escalate sends the next signal of a stop asked of orphans.
func (r *remoteRunner) escalate(now time.Time) {
	if sig := r.orphanStop.next(now, r.stopGrace, r.killGrace); sig != 0 {
		r.signalOrphans(sig)
	}
}

// signalOrphans sends sig to the orphaned processes (under r.mu).
func (r *remoteRunner) signalOrphans(sig syscall.Signal) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.host.Stop(ctx, r.ref, RemoteStop{Signal: int(sig)}); err != nil {
		r.log.Warn("signal the orphaned run on its host", "err", err)
		return
	}
	r.orphanStop.sent(sig)
}

func (r *remoteRunner) stop(req stopRequest) error {
	r.mu.Lock()
	if r.orphans {
		defer r.mu.Unlock()
		r.orphanStop.ask(req, r.signalOrphans)
		return nil
	}
	lost := r.lostErr
	r.mu.Unlock()
	if lost != nil {
		return fmt.Errorf("host %s does not answer: %w", r.hostName, lost)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return r.host.Stop(ctx, r.ref, RemoteStop{By: req.by, Reason: string(req.reason), Kill: req.kill})
}

func (r *remoteRunner) gone() (*EndFacts, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := &EndFacts{Why: WhyInterrupted, Interrupted: InterruptSupervisorGone, SupervisorPID: r.ref.ShimPID}
	if r.orphans {
		f.Orphans = r.orphanStop.facts(r.ref.PID, r.goneAt)
	}
	return f, r.goneAt
}

// detach stops the mirror and lets the job's lock go: the run goes on
// there, and the next trainbot mirrors it from where this one stopped.
func (r *remoteRunner) detach() {
	r.cancel()
	r.wg.Wait()
	r.lock.release()
}

func (r *remoteRunner) done() {
	r.cancel()
	r.wg.Wait()
	r.mu.Lock()
	st := r.st
	r.mu.Unlock()
	if st != nil && st.State != nil && st.State.Ended {
		// The mirror has the host's word on the end too (a database
		// rebuilt from run directories reads it).
		if err := writeStateFile(r.runDir, st.State); err != nil {
			r.log.Warn("write the run's state into its mirror", "err", err)
		}
	}
	r.lock.release()
}

// writeStateFile writes a state.json (atomically).
func writeStateFile(runDir string, st *shimctl.State) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(runDir, shimctl.StateFile), append(b, '\n'))
}
