package trainer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// QueueEntry is a start request waiting for its job's lock (排队).
type QueueEntry struct {
	ID     int64
	Job    string
	Params map[string]string // as the user typed them (validated when queued, again when started)
	Note   string
	By     string // who asked, for the record ("ann (telegram 42)")
	UserID string // who may cancel it besides operators ("telegram:42")
	Origin string // the chat to tell when it starts
	At     time.Time
	Host   string // where it was asked to run (排队 job@host); "" for the job's hosts
}

// QueueStore keeps the queue (the store package implements it).
type QueueStore interface {
	// AddQueued stores an entry and returns its id.
	AddQueued(ctx context.Context, e QueueEntry) (int64, error)
	// Queued returns the entries, oldest first.
	Queued(ctx context.Context) ([]QueueEntry, error)
	// RemoveQueued removes an entry; false when it was not there.
	RemoveQueued(ctx context.Context, id int64) (bool, error)
}

// DefaultMaxQueue is a job's max_queue when not set.
const DefaultMaxQueue = 10

// Queue errors.
var (
	ErrNoQueue     = errors.New("this trainbot keeps no queue")
	ErrQueueFull   = errors.New("the queue of this job is full")
	ErrNotQueued   = errors.New("no such queue entry")
	ErrNotYourTurn = errors.New("only the one who queued it or an operator may cancel it")
)

// QueueNotice is what happened to a queue entry that did not become a run
// (EventQueue): dropped because its job is no longer configured or its
// parameters are no longer valid.
type QueueNotice struct {
	Entry QueueEntry
	Text  string
}

// Enqueue validates a start request and puts it in the queue; it returns
// the entry and its position among the job lock's entries (1: next).
func (s *Supervisor) Enqueue(ctx context.Context, req StartRequest, userID string) (QueueEntry, int, error) {
	if s.opts.Queue == nil {
		return QueueEntry{}, 0, ErrNoQueue
	}
	if j, h, ok := strings.Cut(req.Job, "@"); ok && req.Host == "" {
		req.Job, req.Host = j, h // 排队 train@gpu2
	}
	job, err := s.Job(req.Job)
	if err != nil {
		return QueueEntry{}, 0, err
	}
	if _, err := s.runHosts(job, req.Host); err != nil {
		return QueueEntry{}, 0, err
	}
	if _, err := job.ResolveParams(req.Params); err != nil {
		return QueueEntry{}, 0, err
	}
	s.queueMu.Lock()
	defer s.queueMu.Unlock()
	all, err := s.opts.Queue.Queued(ctx)
	if err != nil {
		return QueueEntry{}, 0, err
	}
	n, pos := 0, 1
	for _, e := range all {
		if e.Job == job.Name {
			n++
		}
		if j, ok := s.jobMap()[e.Job]; ok && j.Lock == job.Lock {
			pos++
		}
	}
	if n >= job.MaxQueue {
		return QueueEntry{}, 0, fmt.Errorf("%w: %d request(s) of %s wait already (max_queue %d)", ErrQueueFull, n, job.Name, job.MaxQueue)
	}
	e := QueueEntry{Job: job.Name, Host: req.Host, Params: maps.Clone(req.Params), Note: req.Note, By: req.By, UserID: userID, Origin: req.Origin, At: time.Now()}
	if e.Params == nil {
		e.Params = map[string]string{}
	}
	if e.ID, err = s.opts.Queue.AddQueued(ctx, e); err != nil {
		return QueueEntry{}, 0, err
	}
	s.log.Info("start request queued", "entry", e.ID, "job", e.Job, "by", e.By, "position", pos)
	// The lock may have freed meanwhile. Counted (under mu, unless
	// closing) so that Close and Detach wait for it.
	s.kickQueue()
	return e, pos, nil
}

// Queued returns the queue, oldest first.
func (s *Supervisor) Queued(ctx context.Context) ([]QueueEntry, error) {
	if s.opts.Queue == nil {
		return nil, nil
	}
	return s.opts.Queue.Queued(ctx)
}

// CancelQueued removes entry id: userID must be the one who queued it,
// unless operator.
func (s *Supervisor) CancelQueued(ctx context.Context, id int64, userID string, operator bool) (QueueEntry, error) {
	if s.opts.Queue == nil {
		return QueueEntry{}, ErrNoQueue
	}
	s.queueMu.Lock()
	defer s.queueMu.Unlock()
	all, err := s.opts.Queue.Queued(ctx)
	if err != nil {
		return QueueEntry{}, err
	}
	for _, e := range all {
		if e.ID != id {
			continue
		}
		if !operator && e.UserID != userID {
			return e, ErrNotYourTurn
		}
		if ok, err := s.opts.Queue.RemoveQueued(ctx, id); err != nil {
			return e, err
		} else if !ok {
			return e, ErrNotQueued
		}
		s.log.Info("queue entry cancelled", "entry", id, "job", e.Job)
		return e, nil
	}
	return QueueEntry{}, ErrNotQueued
}

// kickQueue asks the queue's owner goroutine to start what can start: the
// one entry point of the queue, called when a run ends, when a request is
// queued, at Resume and with the watch for runs left behind (so that a
// restart picks the queue up). It never blocks.
func (s *Supervisor) kickQueue() {
	select {
	case s.queueKick <- struct{}{}:
	default: // a pass is due already: it sees this change too
	}
}

// queueLoop is the queue's owner: the one goroutine that starts queued
// requests, one pass per kick, until the supervisor closes.
func (s *Supervisor) queueLoop() {
	var retry <-chan time.Time // while a queued start waits for GPUs
	for {
		select {
		case <-s.stopWatch:
			return
		case <-s.queueKick:
		case <-retry:
		}
		retry = nil
		if s.startQueued(context.Background()) {
			retry = time.After(s.gpuRetry())
		}
	}
}

// gpuRetry is how often a start waiting for GPUs is tried again.
func (s *Supervisor) gpuRetry() time.Duration {
	if s.opts.GPURetry > 0 {
		return s.opts.GPURetry
	}
	return 2 * time.Second
}

// startQueued starts the oldest queued request of every job lock that is
// free, and reports whether one of them waits for GPUs (which free up
// without a run of this trainbot ending: the queue tries again). Only
// queueLoop calls it.
func (s *Supervisor) startQueued(ctx context.Context) (waitsForGPUs bool) {
	if s.opts.Queue == nil {
		return false
	}
	s.queueMu.Lock()
	defer s.queueMu.Unlock()
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		return false // the next trainbot takes the queue up
	}
	all, err := s.opts.Queue.Queued(ctx)
	if err != nil {
		s.log.Warn("read the queue", "err", err)
		return false
	}
	tried := map[string]bool{} // locks whose head was tried: later entries wait
	for _, e := range all {
		job, ok := s.jobMap()[e.Job]
		if !ok {
			s.dropQueued(ctx, e, fmt.Sprintf("job %s is no longer configured", e.Job))
			continue
		}
		if tried[job.Lock] {
			continue
		}
		tried[job.Lock] = true
		s.mu.Lock()
		busy, closing := s.active[job.Lock] != nil, s.closing
		s.mu.Unlock()
		if busy || closing {
			continue
		}
		req := StartRequest{Job: e.Job, Host: e.Host, Params: e.Params, By: e.By, Origin: e.Origin, Note: e.Note, queued: &e}
		_, err := s.Start(ctx, req)
		var busyErr *BusyError
		switch {
		case errors.As(err, &busyErr) && busyErr.GPUs != nil:
			waitsForGPUs = true
			continue // tried again in a moment
		case errors.As(err, &busyErr), errors.Is(err, ErrClosed):
			continue // its turn comes at the next end
		case errors.Is(err, ErrNoGPUs):
			s.dropQueued(ctx, e, "this host cannot give it its GPUs: "+err.Error())
			continue
		case errors.Is(err, ErrBadParam), errors.Is(err, ErrUnknownJob):
			s.dropQueued(ctx, e, "its parameters are no longer valid: "+err.Error())
			continue
		}
		var startErr *StartError
		if err != nil && !errors.As(err, &startErr) {
			// Nothing was recorded that would say why: the requester is told.
			s.dropQueued(ctx, e, "it could not start: "+err.Error())
			continue
		}
		// Started, or recorded as a run that could not start (its end
		// says why): either way the entry is done.
		if _, rerr := s.opts.Queue.RemoveQueued(ctx, e.ID); rerr != nil {
			s.log.Error("remove a started queue entry", "entry", e.ID, "err", rerr)
		}
	}
	return waitsForGPUs
}

func (s *Supervisor) dropQueued(ctx context.Context, e QueueEntry, why string) {
	if _, err := s.opts.Queue.RemoveQueued(ctx, e.ID); err != nil {
		s.log.Error("drop a queue entry", "entry", e.ID, "err", err)
		return
	}
	s.log.Warn("queue entry dropped", "entry", e.ID, "job", e.Job, "why", why)
	what := strings.TrimSpace(e.Job + " " + paramsText(e.Params))
	text := fmt.Sprintf("queued request #%d (%s, by %s) was dropped: %s", e.ID, what, e.By, why)
	s.publish(Event{Kind: EventQueue, Run: &Run{Job: e.Job, Origin: e.Origin}, Queue: &QueueNotice{Entry: e, Text: text}})
}

// paramsText is "a=1 b=2", sorted.
func paramsText(p map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(p)) {
		parts = append(parts, k+"="+p[k])
	}
	return strings.Join(parts, " ")
}
