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
	"sync"

	"github.com/trainbot/trainbot/hosts"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/shimctl"
)

// ServeOptions are the host's side of the protocol.
type ServeOptions struct {
	// Version is this trainbot's (its Protocol is checked against the
	// hello's).
	Version hosts.Version
	// DataDir is this host's data directory.
	DataDir string
	// ShimCommand starts a run's supervisor (this binary with "shim").
	ShimCommand []string
	// OpenGPUs opens this host's GPU allocator with the hub's rules, once,
	// at the hello: it returns the allocator (nil, with why, when the host
	// has no GPU to give) and its close. Nil: no GPUs.
	OpenGPUs func(GPUSettings) (trainer.GPUAllocator, string, func())
	Logger   *slog.Logger
}

// Serve answers a hub's requests from in on out until in ends (the hub
// closed the session, or the connection is gone) or ctx does; the runs it
// started go on. Requests after the hello are served concurrently.
func Serve(ctx context.Context, in io.Reader, out io.Writer, o ServeOptions) error {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &server{o: o, w: bufio.NewWriterSize(out, 64<<10)}
	defer s.close()
	lines := bufio.NewReaderSize(in, 64<<10)
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil {
		line, err := readLine(lines)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		var req request
		if err := json.Unmarshal(line, &req); err != nil {
			s.reply(&response{Error: "bad request: " + err.Error()}, nil)
			continue
		}
		if req.Op == opHello {
			s.reply(s.hello(req), nil)
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			resp, data := s.handle(req)
			resp.ID = req.ID
			s.reply(resp, data)
		}()
	}
	return ctx.Err()
}

// readLine reads one line of at most maxLine bytes.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		part, err := r.ReadSlice('\n')
		line = append(line, part...)
		if len(line) > maxLine {
			return nil, fmt.Errorf("a line of more than %d bytes", maxLine)
		}
		switch {
		case err == nil:
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}

type server struct {
	o       ServeOptions
	wmu     sync.Mutex
	w       *bufio.Writer
	zbuf    bytes.Buffer
	zw      *flate.Writer
	mu      sync.Mutex
	hub     string
	gpus    trainer.GPUAllocator
	closers []func()
	shims   sync.WaitGroup
}

func (s *server) close() {
	s.mu.Lock()
	closers := s.closers
	s.closers = nil
	s.mu.Unlock()
	for _, c := range closers {
		c()
	}
}

func (s *server) hello(req request) *response {
	resp := &response{ID: req.ID, Hello: &HelloReply{Version: s.o.Version, DataDir: s.o.DataDir}}
	h := req.Hello
	if h == nil {
		resp.Error = "hello without its fields"
		return resp
	}
	if h.Protocol != s.o.Version.Protocol {
		resp.Error, resp.Kind = fmt.Sprintf("this host speaks protocol %d, the hub %d", s.o.Version.Protocol, h.Protocol), kindProtocol
		return resp
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hub != "" {
		return resp // said once
	}
	s.hub = h.Hub
	if s.o.OpenGPUs == nil {
		resp.Hello.NoGPU = "this trainbot opens no GPUs"
		return resp
	}
	gpus, why, closeGPUs := s.o.OpenGPUs(h.GPU)
	if closeGPUs != nil {
		s.closers = append(s.closers, closeGPUs)
	}
	s.gpus, resp.Hello.NoGPU = gpus, why
	return resp
}

func (s *server) handle(req request) (*response, []byte) {
	if req.Op == opCheckpoint {
		path, err := trainer.NewestCheckpointHere(req.Dir, req.File)
		if err != nil {
			return errResponse(err), nil
		}
		return &response{Checkpoint: path}, nil
	}
	if req.Op != opStart && req.Ref == nil {
		return &response{Error: req.Op + " without a run"}, nil
	}
	switch req.Op {
	case opStart:
		if req.Start == nil {
			return &response{Error: "start without a run"}, nil
		}
		s.mu.Lock()
		gpus := s.gpus
		s.mu.Unlock()
		st, err := trainer.StartHere(*req.Start, trainer.HereOptions{DataDir: s.o.DataDir, ShimCommand: s.o.ShimCommand, GPUs: gpus}, func(h *shimctl.Handle) {
			s.shims.Go(func() { h.Wait() }) // reaped while this agent lives; init reaps it after
		})
		if err != nil {
			s.o.Logger.Info("start refused", "job", req.Start.Job, "run", req.Start.RunID, "err", err)
			return errResponse(err), nil
		}
		return &response{Started: st}, nil
	case opStatus:
		st, err := trainer.StatusHere(s.o.DataDir, *req.Ref)
		if err != nil {
			return errResponse(err), nil
		}
		return &response{Status: st}, nil
	case opStop:
		if req.Stop == nil {
			return &response{Error: "stop without its fields"}, nil
		}
		if err := trainer.StopHere(s.o.DataDir, *req.Ref, *req.Stop); err != nil {
			return errResponse(err), nil
		}
		return &response{}, nil
	case opRead:
		if req.Max <= 0 || req.Max > maxRead || req.Off < 0 {
			return &response{Error: fmt.Sprintf("read of %d bytes at %d: want 1..%d at 0 or more", req.Max, req.Off, maxRead)}, nil
		}
		b, err := trainer.ReadHere(s.o.DataDir, *req.Ref, req.File, req.Off, req.Max)
		if err != nil {
			return errResponse(err), nil
		}
		return &response{}, b
	}
	return &response{Error: fmt.Sprintf("unknown op %q", req.Op)}, nil
}

// errResponse is an error with its kind.
func errResponse(err error) *response {
	r := &response{Error: err.Error()}
	var busy *trainer.BusyError
	var short *trainer.GPUShortage
	switch {
	case errors.As(err, &busy) && busy.GPUs != nil, errors.As(err, &short):
		r.Kind = kindGPUs
	case errors.As(err, &busy):
		r.Kind = kindBusy
		if busy.Other != "" {
			r.Error = busy.Other
		}
	case errors.Is(err, trainer.ErrNoGPUs):
		r.Kind = kindNoGPUs
	case errors.Is(err, shimctl.ErrNotStarted):
		r.Kind = kindNotStarted
	}
	return r
}

// reply writes one answer and its data (deflated when that is shorter).
func (s *server) reply(resp *response, data []byte) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if len(data) >= compressFrom {
		s.zbuf.Reset()
		if s.zw == nil {
			s.zw, _ = flate.NewWriter(&s.zbuf, flate.BestSpeed)
		} else {
			s.zw.Reset(&s.zbuf)
		}
		s.zw.Write(data)
		s.zw.Close()
		if s.zbuf.Len() < len(data) {
			data, resp.Z = s.zbuf.Bytes(), true
		}
	}
	resp.N = len(data)
	b, err := json.Marshal(resp)
	if err != nil {
		b, _ = json.Marshal(&response{ID: resp.ID, Error: err.Error()})
		data = nil
	}
	s.w.Write(append(b, '\n'))
	s.w.Write(data)
	s.w.Flush()
}
