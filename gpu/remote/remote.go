// Package remote samples the GPUs of the [[hosts]] from the hub: every
// interval it runs each host's `trainbot gpu --json` over that host's one
// SSH connection (hosts.Host), keeps the newest answer per host, records
// since when a host has not answered (the connection down, the command
// failing, output that is no sample), and evaluates the GPU alerts on
// each answer with the host's name in them (gpu.Alerter).
//
// One goroutine per host takes the samples, so a host never has more than
// one sampling session open: OpenSSH allows 10 per connection, and the
// remote runs share it. A host that does not answer delays only its own
// samples.
//
// The remote trainbot attributes memory to the runs of its own data
// directory, whose ids are not the hub's: a remote sample keeps its
// holders (user, pid, command, memory) and drops the run ids.
package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/trainbot/trainbot/gpu"
	"github.com/trainbot/trainbot/hosts"
)

// Defaults of Options' zero fields.
const (
	DefaultInterval = 2 * time.Second
	DefaultTimeout  = 5 * time.Second
)

// Options configure a Sampler.
type Options struct {
	// Hosts are the hosts to sample, in the order Samples lists them.
	Hosts []*hosts.Host
	// Interval is the pause between two samples of a host ([gpu]
	// interval; default 2 s).
	Interval time.Duration
	// Timeout bounds one sample: the wait for the connection and the
	// remote command (default 5 s). A host that takes longer has not
	// answered.
	Timeout time.Duration
	// Thresholds and Alert: the alerts of each host's samples (nil Alert:
	// none).
	Thresholds gpu.Thresholds
	Alert      func(gpu.Alert)
	// Logger gets a line when a host stops answering and when it answers
	// again (nil: none).
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Sampler samples the hosts' GPUs until Close.
type Sampler struct {
	o Options

	mu      sync.Mutex
	samples []gpu.HostSample // in Hosts' order
	changed chan struct{}    // closed and replaced on every sample

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a sampler of o.Hosts; Start starts it.
func New(o Options) *Sampler {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Sampler{o: o, changed: make(chan struct{})}
	for _, h := range o.Hosts {
		s.samples = append(s.samples, gpu.HostSample{Host: h.Target.Name})
	}
	return s
}

// Start samples every host in the background, the first time at once.
func (s *Sampler) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	for i, h := range s.o.Hosts {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.loop(ctx, i, h)
		}()
	}
}

// Close stops the sampling and waits for it.
func (s *Sampler) Close() {
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
}

// Samples returns what is known of each host, in Hosts' order.
func (s *Sampler) Samples() []gpu.HostSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]gpu.HostSample(nil), s.samples...)
}

// Changed is closed when a host's sample changes next (a test waits on it).
func (s *Sampler) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

func (s *Sampler) loop(ctx context.Context, i int, h *hosts.Host) {
	name := h.Target.Name
	log := s.o.Logger.With("host", name)
	alerter := gpu.NewAlerter(s.o.Thresholds, name)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		began := s.o.Now()
		snap, partial, err := s.sample(ctx, h)
		if ctx.Err() != nil {
			return
		}
		// A sample's alerts are raised before it is published, so that
		// whoever sees the sample (Samples, Changed) has had its alerts.
		if err == nil && s.o.Alert != nil {
			for _, a := range alerter.Check(snap) {
				s.o.Alert(a)
			}
		}
		s.record(i, log, began, snap, partial, err)
		t.Reset(s.o.Interval)
	}
}

// sample is one answer of h's `trainbot gpu --json`, within Timeout.
func (s *Sampler) sample(ctx context.Context, h *hosts.Host) (snap gpu.Snapshot, partial, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	c, err := h.Client(ctx)
	if err != nil {
		return gpu.Snapshot{}, nil, err
	}
	out, err := c.GPUJSON(ctx)
	if err != nil {
		return gpu.Snapshot{}, nil, err
	}
	var j gpu.JSON
	if err := json.Unmarshal(out, &j); err != nil {
		return gpu.Snapshot{}, nil, fmt.Errorf("trainbot gpu --json on %s: %w", h.Target.Name, err)
	}
	if j.SampledAt.IsZero() {
		return gpu.Snapshot{}, nil, fmt.Errorf("trainbot gpu --json on %s: no sampled_at: not a sample", h.Target.Name)
	}
	snap, partial = j.Snapshot()
	// The remote store's run ids are not the hub's.
	snap.Runs = nil
	for k := range snap.Processes {
		snap.Processes[k].RunID = 0
	}
	return snap, partial, nil
}

// record keeps the result of the try that began then.
func (s *Sampler) record(i int, log *slog.Logger, began time.Time, snap gpu.Snapshot, partial, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	hs := &s.samples[i]
	switch {
	case err == nil:
		if hs.Unreachable != nil {
			log.Info("host answers again: sampling its GPUs", "after", s.o.Now().Sub(hs.Since).Round(time.Second))
		}
		hs.Snapshot, hs.Partial, hs.Unreachable, hs.Since = snap, partial, nil, time.Time{}
	case hs.Unreachable == nil:
		hs.Since = began
		log.Warn("host does not answer: its GPUs are not sampled", "err", err)
		fallthrough
	default:
		if errors.Is(err, context.DeadlineExceeded) && hs.Unreachable != nil && !errors.Is(hs.Unreachable, context.DeadlineExceeded) {
			// "no connection yet: deadline exceeded" says less than why the
			// connection was lost: keep that.
			err = fmt.Errorf("%w (before: %v)", err, hs.Unreachable)
		}
		hs.Unreachable = err
	}
	close(s.changed)
	s.changed = make(chan struct{})
}
