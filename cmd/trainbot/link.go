package main

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/trainbot/trainbot/bot/command"
	"github.com/trainbot/trainbot/config"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/web"
)

// cmdLink prints a signed link to a run's page, or to the runs list.
func cmdLink(ctx context.Context, args []string, e env) int {
	fs := newFlags("link", "[ID]", e)
	var cf configFlags
	cf.register(fs, false)
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	var id int64
	switch len(pos) {
	case 0:
	case 1:
		if id, ok = runIDArg(pos[0]); !ok {
			return usageError(fs, e, "%q is not a run id", pos[0])
		}
	default:
		return usageError(fs, e, "link takes at most one run id")
	}
	st, cfg, code := openHistory(e, cf)
	if st == nil {
		return code
	}
	defer st.Close()
	if id != 0 {
		if r, code := loadRun(ctx, e, st, cfg.DataDir, id); r == nil {
			return code
		}
	}
	links, err := pageLinks(cfg.HTTP, cfg.DataDir, true)
	if err != nil {
		return errorf(e, "%v", err)
	}
	u := links.List()
	if id != 0 {
		u = links.Run(id)
	}
	fmt.Fprintln(e.stdout, u)
	fmt.Fprintf(e.stderr, "valid until %s ([http] link_ttl)\n", time.Now().Add(links.TTL).Format("2006-01-02 15:04"))
	return exitOK
}

// pageLinks returns the signer of the page links (the key in the data
// directory, created when missing) and their base: [http] public_url,
// or, for the terminal (local), the listen address itself ("" when
// neither is set: no links).
func pageLinks(h config.HTTPConfig, dataDir string, local bool) (*web.Links, error) {
	signer, err := web.LoadKey(dataDir)
	if err != nil {
		return nil, err
	}
	base := h.PublicURL
	if base == "" && local {
		if h.Listen == "" {
			return nil, fmt.Errorf("no [http] listen in the config: the pages are off (docs/charts-and-pages.md, \"Run pages in the browser\")")
		}
		host, port, err := net.SplitHostPort(h.Listen)
		if err != nil {
			return nil, fmt.Errorf("[http] listen %q: %v", h.Listen, err)
		}
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "127.0.0.1"
		}
		base = "http://" + net.JoinHostPort(host, port)
	}
	return &web.Links{Base: base, Signer: signer, TTL: time.Duration(h.LinkTTL)}, nil
}

// runTail is the last lines of a run's output for its page: from the
// supervisor while it runs here, else from its log file.
func runTail(sup *trainer.Supervisor) func(r *trainer.Run, n int) ([]string, error) {
	return func(r *trainer.Run, n int) ([]string, error) {
		if lines, err := sup.Tail(r.ID, n); err == nil {
			return lines, nil
		}
		return command.TailFile(r.LogPath, n)
	}
}
