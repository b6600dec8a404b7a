package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/render"
	"github.com/trainbot/trainbot/gpu"
	"github.com/trainbot/trainbot/mcpserver"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/web"
)

// cmdMCP is `trainbot mcp`: the Model Context Protocol server for coding
// agents over stdin/stdout, with the supervisor of the config's data
// directory (runs it starts are re-attached by a later serve).
func cmdMCP(ctx context.Context, args []string, e env) int {
	return chatCommand(ctx, args, e, "mcp", botOptions{mcp: true})
}

// serveMCP answers MCP on stdin/stdout until the client closes stdin or a
// signal arrives; the runs are left running (the supervisor's close
// detaches).
func (b *bot) serveMCP() int {
	sup := b.sup
	var gpuJSON func(context.Context) any
	if b.telemetry != nil {
		gpuJSON = func(ctx context.Context) any {
			runs := map[int]int64{} // process groups of the active runs
			for _, st := range sup.Active() {
				if st.Run.PID > 0 && st.Run.Host == "" { // a run on another host has its pid there
					runs[st.Run.PID] = st.Run.ID
				}
			}
			return gpu.ToJSON(gpu.Collect(ctx, b.telemetry, runs))
		}
	}
	fit := func(ctx context.Context, o render.FitOptions) (trainer.MemoryFit, string, error) {
		o.HostAvailable = hostAvailable
		return render.MemoryFit(ctx, b.st, o)
	}
	chart := func(ctx context.Context, id int64, kind string) ([]byte, error) {
		run, err := b.st.Run(ctx, id)
		if err != nil {
			return nil, err
		}
		var img chat.Image
		if kind == "memory" {
			img, err = b.charts.Memory(ctx, run)
		} else {
			img, err = b.charts.Loss(ctx, run, render.LossOptions{})
		}
		return img.PNG, err
	}
	s := mcpserver.New(mcpserver.Options{Trainer: sup, History: b.st, GPU: gpuJSON, Fit: fit, Chart: chart, AllowControl: b.cfg.MCP.AllowControl,
		User: localUser(), Version: thisVersion().Version, Logger: b.log})
	if b.o.mcpHTTP != "" {
		return b.serveMCPHTTP(s)
	}
	b.log.Info("mcp: serving on stdin/stdout", "allow_control", b.cfg.MCP.AllowControl)
	err := s.Run(b.ctx, &mcp.IOTransport{Reader: io.NopCloser(b.e.stdin), Writer: nopWriteCloser{b.e.stdout}})
	switch {
	case b.ctx.Err() != nil:
		return 130
	case err != nil && !errors.Is(err, io.EOF):
		b.log.Info("mcp: the client left", "err", err)
	}
	return exitOK
}

// localUser is who MCP calls are audited as: this process's user.
func localUser() mcpserver.User {
	u := mcpserver.User{ID: int64(os.Getuid()), Name: strconv.Itoa(os.Getuid())}
	if cur, err := user.Current(); err == nil && cur.Username != "" {
		u.Name = cur.Username
	}
	return u
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// serveMCPHTTP answers MCP over streamable HTTP on --http until a signal
// arrives. Every request needs a token of the runs list, the pages' HMAC
// token (trainbot link without a run: ?t=TOKEN or Authorization: Bearer
// TOKEN); one valid for 30 days is printed at the start.
func (b *bot) serveMCPHTTP(s *mcp.Server) int {
	signer, err := web.LoadKey(b.cfg.DataDir)
	if err != nil {
		return errorf(b.e, "%v", err)
	}
	ln, err := net.Listen("tcp", b.o.mcpHTTP)
	if err != nil {
		return errorf(b.e, "mcp --http: %v", err)
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	guard := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := r.URL.Query().Get("t")
		if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			tok = v
		}
		scope, err := signer.Verify(tok, time.Now())
		if err == nil && scope != web.ScopeList {
			err = web.ErrOtherScope
		}
		if err != nil {
			http.Error(w, "trainbot mcp: a token of the runs list is required (trainbot link --config FILE, its t=): "+err.Error(), http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: guard, ReadHeaderTimeout: 10 * time.Second}
	url := "http://" + ln.Addr().String() + "/mcp?t=" + signer.Sign(web.ScopeList, time.Now().Add(30*24*time.Hour))
	fmt.Fprintf(b.e.stderr, "trainbot mcp: serving MCP (streamable HTTP) on %s\n", url)
	b.log.Info("mcp: serving on streamable HTTP", "address", ln.Addr().String(), "allow_control", b.cfg.MCP.AllowControl)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case <-b.ctx.Done():
	case err := <-done:
		return errorf(b.e, "mcp --http: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(ctx)
	return 130
}
