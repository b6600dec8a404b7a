package hosts

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/trainbot/trainbot/bot/reconnect"
)

// Host keeps one connection to a target and dials it again, with
// bot/reconnect's backoff, when it is lost; every connection's remote
// trainbot is checked against the hub's protocol first (a host that
// speaks another is retried like an unreachable one: someone may install
// the right one meanwhile). Start it, share it, Close it.
type Host struct {
	Target *Target
	Opts   Options
	// Hub is this trainbot's version: its protocol is the rule.
	Hub Version
	// Backoff is the pause between dials (reconnect's defaults: 1 s to
	// 5 min).
	Backoff reconnect.Backoff

	mu      sync.Mutex
	cur     *Client
	lastErr error
	changed chan struct{} // closed and replaced when cur or lastErr changes

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start dials in the background until Close.
func (h *Host) Start(ctx context.Context) {
	ctx, h.cancel = context.WithCancel(ctx)
	h.mu.Lock()
	if h.changed == nil {
		h.changed = make(chan struct{})
	}
	h.mu.Unlock()
	o := h.Opts.withDefaults()
	loop := reconnect.Loop{Log: o.Log.With("host", h.Target.Name), Backoff: h.Backoff}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		loop.Run(ctx, h.session)
	}()
}

// session is one connection, from its dial to its loss.
func (h *Host) session(ctx context.Context, healthy func()) error {
	c, err := Dial(ctx, h.Target, h.Opts)
	if err != nil {
		h.set(nil, err)
		return err
	}
	v, err := c.RemoteVersion(ctx)
	if err == nil {
		err = CheckVersion(h.Target.Name, h.Hub, v)
	}
	if err != nil {
		c.Close()
		h.set(nil, err)
		return err
	}
	healthy()
	h.set(c, nil)
	select {
	case <-ctx.Done():
	case <-c.Done():
	}
	err = c.Err()
	c.Close()
	if ctx.Err() != nil {
		err = errClosed
	}
	h.set(nil, err)
	return err
}

func (h *Host) set(c *Client, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cur, h.lastErr = c, err
	close(h.changed)
	h.changed = make(chan struct{})
}

// Client returns the live connection, waiting for one until ctx ends;
// then the error says why the last dial failed or the last connection
// ended.
func (h *Host) Client(ctx context.Context) (*Client, error) {
	for {
		h.mu.Lock()
		c, last, changed := h.cur, h.lastErr, h.changed
		h.mu.Unlock()
		if changed == nil {
			return nil, errors.New("host not started")
		}
		if c != nil && c.Err() == nil {
			return c, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			if last != nil {
				return nil, fmt.Errorf("host %s: %w", h.Target.Name, last)
			}
			return nil, fmt.Errorf("host %s: no connection yet: %w", h.Target.Name, context.Cause(ctx))
		}
	}
}

// Close stops dialling, closes the connection and waits.
func (h *Host) Close() {
	if h.cancel != nil {
		h.cancel()
	}
	h.wg.Wait()
}
