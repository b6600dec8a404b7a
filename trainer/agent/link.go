package agent

import (
	"bufio"
	"bytes"
	"compress/flate"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/trainbot/trainbot/hosts"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/shimctl"
)

// Link is the hub's side of one host: a trainer.RemoteHost. It runs the
// host's `trainbot agent` in a session of the host's connection the first
// time it is needed, and again after that session or connection ends;
// calls wait (within their context) for the connection.
type Link struct {
	Host *hosts.Host
	// Hub names this trainbot there; GPU are its [gpu] rules.
	Hub    string
	GPU    GPUSettings
	Logger *slog.Logger

	dial sync.Mutex // one session start at a time
	mu   sync.Mutex
	cur  *session
	// Sent and Received count the bytes of every session (the requests'
	// lines; the answers' lines and data as they came over the wire).
	Sent, Received atomic.Int64
}

var _ trainer.RemoteHost = (*Link)(nil)

// session is one `trainbot agent` on the host.
type session struct {
	l       *Link
	w       *io.PipeWriter
	wmu     sync.Mutex
	cancel  context.CancelFunc
	next    atomic.Uint64
	mu      sync.Mutex
	pending map[uint64]chan result
	err     error // why it ended; nil while it lives
	stderr  limitedBuffer
	done    chan struct{}
	hello   HelloReply
}

type result struct {
	resp *response
	data []byte
	err  error
}

// Close ends the agent session (the runs go on).
func (l *Link) Close() {
	l.mu.Lock()
	s := l.cur
	l.cur = nil
	l.mu.Unlock()
	if s != nil {
		s.close(errors.New("closed"))
		<-s.done
	}
}

// session returns the live agent session, starting one when needed.
func (l *Link) session(ctx context.Context) (*session, error) {
	l.mu.Lock()
	s := l.cur
	l.mu.Unlock()
	if s != nil && s.alive() {
		return s, nil
	}
	l.dial.Lock()
	defer l.dial.Unlock()
	l.mu.Lock()
	s = l.cur
	l.mu.Unlock()
	if s != nil && s.alive() {
		return s, nil
	}
	c, err := l.Host.Client(ctx)
	if err != nil {
		return nil, err
	}
	s, err = l.start(ctx, c)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.cur = s
	l.mu.Unlock()
	return s, nil
}

// start runs the host's agent and says hello.
func (l *Link) start(ctx context.Context, c *hosts.Client) (*session, error) {
	log := l.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	line := c.Trainbot() + " agent"
	if c.Target.DataDir != "" {
		line += " --data " + hosts.QuotePath(c.Target.DataDir)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	sctx, cancel := context.WithCancel(context.Background())
	s := &session{l: l, w: inW, cancel: cancel, pending: map[uint64]chan result{}, done: make(chan struct{})}
	s.stderr.max = 4096
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		res, err := c.Run(sctx, hosts.Cmd{Line: line, Stdin: inR, Stdout: outW, Stderr: &s.stderr})
		if err == nil {
			err = fmt.Errorf("the agent on %s ended (exit status %d%s)%s", c.Target.Name, res.Status, res.Signal, s.stderr.tail())
		}
		inR.CloseWithError(err)
		outW.CloseWithError(err)
	}()
	go func() {
		defer close(s.done)
		s.read(outR)
		<-ran
		log.Debug("agent session ended", "host", c.Target.Name, "err", s.err)
	}()
	resp, _, err := s.call(ctx, &request{Op: opHello, Hello: &Hello{Protocol: hosts.Protocol, Hub: l.Hub, GPU: l.GPU}})
	if err == nil && resp.Hello == nil {
		err = errors.New("no hello")
	}
	var perr *hosts.ProtocolError
	if err != nil && resp != nil && resp.Kind == kindProtocol && resp.Hello != nil {
		err = hosts.CheckVersion(c.Target.Name, l.Host.Hub, resp.Hello.Version)
	}
	if err != nil {
		s.close(err)
		<-s.done
		if errors.As(err, &perr) {
			return nil, err
		}
		return nil, fmt.Errorf("start the agent on %s: %w", c.Target.Name, err)
	}
	s.hello = *resp.Hello
	log.Debug("agent session started", "host", c.Target.Name, "version", resp.Hello.Version.String(), "data_dir", resp.Hello.DataDir, "no_gpu", resp.Hello.NoGPU)
	return s, nil
}

func (s *session) alive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err == nil
}

// close ends the session: pending calls fail with err.
func (s *session) close(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	pending := s.pending
	s.pending = map[uint64]chan result{}
	s.mu.Unlock()
	for _, ch := range pending {
		ch <- result{err: err}
	}
	s.w.CloseWithError(err)
	s.cancel()
}

// read takes the answers until the agent's output ends.
func (s *session) read(r io.Reader) {
	cr := &countingReader{r: r, n: &s.l.Received}
	br := bufio.NewReaderSize(cr, 64<<10)
	for {
		line, err := readLine(br)
		if err != nil {
			s.close(fmt.Errorf("agent session: %w", err))
			return
		}
		var resp response
		if err := json.Unmarshal(line, &resp); err != nil {
			s.close(fmt.Errorf("agent session: bad answer: %w", err))
			return
		}
		var data []byte
		if resp.N > 0 {
			if resp.N > maxData {
				s.close(fmt.Errorf("agent session: an answer of %d bytes", resp.N))
				return
			}
			data = make([]byte, resp.N)
			if _, err := io.ReadFull(br, data); err != nil {
				s.close(fmt.Errorf("agent session: %w", err))
				return
			}
			if resp.Z {
				if data, err = inflate(data); err != nil {
					s.close(fmt.Errorf("agent session: %w", err))
					return
				}
			}
		}
		s.mu.Lock()
		ch := s.pending[resp.ID]
		delete(s.pending, resp.ID)
		s.mu.Unlock()
		if ch != nil {
			ch <- result{resp: &resp, data: data}
		}
	}
}

func inflate(b []byte) ([]byte, error) {
	zr := flate.NewReader(bytes.NewReader(b))
	defer zr.Close()
	return io.ReadAll(io.LimitReader(zr, maxData+1))
}

// call sends one request and waits for its answer. An answer with an
// error is returned with it (as err too).
func (s *session) call(ctx context.Context, req *request) (*response, []byte, error) {
	req.ID = s.next.Add(1)
	ch := make(chan result, 1)
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return nil, nil, err
	}
	s.pending[req.ID] = ch
	s.mu.Unlock()
	b, err := json.Marshal(req)
	if err != nil {
		return nil, nil, err
	}
	s.wmu.Lock()
	n, err := s.w.Write(append(b, '\n'))
	s.wmu.Unlock()
	s.l.Sent.Add(int64(n))
	if err != nil {
		s.close(err)
		return nil, nil, err
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, nil, r.err
		}
		if r.resp.Error != "" {
			return r.resp, nil, errors.New(r.resp.Error)
		}
		return r.resp, r.data, nil
	case <-ctx.Done():
		s.mu.Lock()
		delete(s.pending, req.ID)
		s.mu.Unlock()
		return nil, nil, context.Cause(ctx)
	}
}

// do makes one call on the live session.
func (l *Link) do(ctx context.Context, req *request) (*response, []byte, error) {
	s, err := l.session(ctx)
	if err != nil {
		return nil, nil, err
	}
	return s.call(ctx, req)
}

// Start starts a run on the host.
func (l *Link) Start(ctx context.Context, spec trainer.RemoteSpec) (*trainer.RemoteStarted, error) {
	resp, _, err := l.do(ctx, &request{Op: opStart, Start: &spec})
	if err != nil {
		return nil, remoteError(resp, spec.GPUs, err)
	}
	if resp.Started == nil {
		return nil, errors.New("the host said nothing of the run it started")
	}
	return resp.Started, nil
}

// remoteError is the error of an answer as the kind of error the host
// had.
func remoteError(resp *response, want trainer.GPURequest, err error) error {
	if resp == nil {
		return err
	}
	switch resp.Kind {
	case kindBusy:
		return &trainer.BusyError{Other: resp.Error}
	case kindGPUs:
		return &trainer.BusyError{GPUs: &trainer.GPUShortage{Want: want, Cause: errors.New(resp.Error)}}
	case kindNoGPUs:
		return fmt.Errorf("%w: %s", trainer.ErrNoGPUs, strings.TrimPrefix(resp.Error, trainer.ErrNoGPUs.Error()+": "))
	case kindNotStarted:
		return fmt.Errorf("%w: %s", shimctl.ErrNotStarted, strings.TrimPrefix(resp.Error, shimctl.ErrNotStarted.Error()+": "))
	}
	return err
}

// Status says how a run on the host is.
func (l *Link) Status(ctx context.Context, ref trainer.RemoteRef) (*trainer.RemoteStatus, error) {
	resp, _, err := l.do(ctx, &request{Op: opStatus, Ref: &ref})
	if err != nil {
		return nil, err
	}
	if resp.Status == nil {
		return nil, errors.New("the host said nothing of the run")
	}
	return resp.Status, nil
}

// Stop forwards a stop to a run on the host.
func (l *Link) Stop(ctx context.Context, ref trainer.RemoteRef, req trainer.RemoteStop) error {
	_, _, err := l.do(ctx, &request{Op: opStop, Ref: &ref, Stop: &req})
	return err
}

// Read reads a run's file on the host.
func (l *Link) Read(ctx context.Context, ref trainer.RemoteRef, file string, off int64, max int) ([]byte, error) {
	_, data, err := l.do(ctx, &request{Op: opRead, Ref: &ref, File: file, Off: off, Max: min(max, maxRead)})
	return data, err
}

// countingReader counts what it reads into n.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// limitedBuffer keeps the last max bytes written.
type limitedBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b = append(b.b, p...)
	if len(b.b) > b.max {
		b.b = b.b[len(b.b)-b.max:]
	}
	return len(p), nil
}

// tail is ": " and the last line written, or "".
func (b *limitedBuffer) tail() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := strings.TrimSpace(string(b.b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if s == "" {
		return ""
	}
	return ": " + s
}

// Checkpoint is the newest complete checkpoint of pattern under dir on
// the host.
func (l *Link) Checkpoint(ctx context.Context, dir, pattern string) (string, error) {
	resp, _, err := l.do(ctx, &request{Op: opCheckpoint, Dir: dir, File: pattern})
	if err != nil {
		return "", err
	}
	return resp.Checkpoint, nil
}
