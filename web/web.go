// Package web serves trainbot's HTTP endpoints on [http] listen:
// /metrics for Prometheus (the runs, the GPUs, the history, the outbox,
// and Go's and the process's series, in the text exposition format that
// exposition.go writes), /healthz (200 when the store and
// the chat transports are up, 503 with the reasons otherwise), and the
// token-guarded run pages (/, /runs/ID, /compare and their /api/…): charts
// drawn in the browser from downsampled JSON, live over Server-Sent
// Events, every asset embedded.
//
// The server is bounded (limits.go, conns.go): timeouts for headers,
// requests, writes and idle keep-alives (the live streams move their own
// deadlines), a header size limit, and a cap on the connections open at
// once (Options.MaxConnections, at most a quarter of the open-file
// limit), so that no number of clients can take the descriptors the runs
// and the store need. Every response forbids framing.
//
// It only reads: what it shows comes from functions cmd/trainbot passes
// in, so nothing here can hold up a run, the store's writer or a chat.
package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Check is one part of /healthz: its name ("store", "telegram") and a
// function that returns nil when the part is up, or why it is not.
type Check struct {
	Name string
	Up   func(context.Context) error
}

// Options configure a Server.
type Options struct {
	// Listen is the address ("127.0.0.1:9464"; port 0 picks one: Addr
	// tells which).
	Listen  string
	Metrics *Metrics
	Checks  []Check
	// Pages are the run pages (nil: none; / then only names the endpoints).
	Pages *Pages
	// MaxConnections caps the connections open at once (default
	// DefaultMaxConnections); Start lowers it to a quarter of the
	// open-file limit.
	MaxConnections int
	Logger         *slog.Logger
}

// DefaultMaxConnections is the cap on connections when Options has none.
const DefaultMaxConnections = 256

// Server is the HTTP server. Start listens and serves in a goroutine that
// Close stops and waits for.
type Server struct {
	opts Options
	ln   *connLimit
	srv  *http.Server
	wg   sync.WaitGroup
	// stop is closed by Close: it ends the live streams, which Shutdown
	// would otherwise wait for.
	stop     chan struct{}
	stopOnce sync.Once
}

// New returns a server that is not listening yet.
func New(o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxConnections <= 0 {
		o.MaxConnections = DefaultMaxConnections
	}
	mux := http.NewServeMux()
	if o.Metrics != nil {
		mux.Handle("GET /metrics", o.Metrics.handler(o.Logger))
	}
	s := &Server{opts: o, stop: make(chan struct{})}
	mux.HandleFunc("GET /healthz", s.healthz)
	if o.Pages != nil {
		o.Pages.register(mux, s)
	} else {
		mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintln(w, "trainbot: /metrics (Prometheus), /healthz")
		})
	}
	s.srv = &http.Server{Handler: noFraming(mux), ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout,
		WriteTimeout: writeTimeout, IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes, ErrorLog: newErrorLog(o.Logger)}
	return s
}

// Start listens on the address and serves until Close.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.opts.Listen)
	if err != nil {
		return fmt.Errorf("http listen: %w", err)
	}
	want, nofile := s.opts.MaxConnections, openFileLimit()
	n := connCap(want, nofile)
	if n < want {
		s.opts.Logger.Warn("http max_connections lowered to a quarter of the open-file limit", "max_connections", want, "nofile", nofile, "using", n)
	}
	s.ln = newConnLimit(ln, n, s.opts.Logger)
	s.srv.ConnState = s.ln.state
	s.opts.Logger.Info("http listening: /metrics, /healthz", "pages", s.opts.Pages != nil, "addr", ln.Addr().String(), "max_connections", n)
	s.wg.Go(func() {
		if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.opts.Logger.Error("http server stopped", "err", err)
		}
	})
	return nil
}

// Addr is the address listened on (after Start).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops taking connections, lets the requests in flight finish
// until ctx ends, and waits for the server's goroutine.
func (s *Server) Close(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.stop) })
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, s.srv.Close())
	}
	s.wg.Wait()
	return err
}

// healthTimeout bounds each check of one /healthz.
const healthTimeout = 5 * time.Second

// healthz answers 200 "ok" when every check is up, else 503 with one line
// per part that is not.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
	defer cancel()
	var bad []string
	for _, c := range s.opts.Checks {
		if err := c.Up(ctx); err != nil {
			bad = append(bad, c.Name+": "+err.Error())
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if len(bad) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, strings.Join(bad, "\n"))
		return
	}
	fmt.Fprintln(w, "ok")
}
