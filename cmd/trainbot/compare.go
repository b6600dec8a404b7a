package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/render"
	"github.com/trainbot/trainbot/config"
	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/internal/termsafe"
	"github.com/trainbot/trainbot/plots"
	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
)

// newPainter loads the chart fonts of the [plots] section.
func newPainter(pc config.PlotsConfig) (*plots.Painter, error) {
	font := strings.TrimSpace(pc.Font)
	if font != plots.FontNone {
		font = config.ExpandHome(font)
	}
	p, err := plots.New(plots.Options{Font: font})
	if err != nil {
		return nil, fmt.Errorf("plots.font: %w", err)
	}
	return p, nil
}

// chartSmoothing maps [plots] smoothing to render.Charts: 0 in the config
// means no smoothed line.
func chartSmoothing(pc config.PlotsConfig) float64 {
	if pc.Smoothing == 0 {
		return -1
	}
	return pc.Smoothing
}

// xFlag reads --x.
func xFlag(v string) (xTime bool, err error) {
	switch v {
	case "step", "":
		return false, nil
	case "time":
		return true, nil
	}
	return false, fmt.Errorf("--x %q: want step or time", v)
}

// runIDArg reads "12" or "#12".
func runIDArg(s string) (int64, bool) {
	id, err := strconv.ParseInt(strings.TrimPrefix(s, "#"), 10, 64)
	return id, err == nil && id > 0
}

// oneRunID reads the one run id a command (fs) takes; ok is false after a
// usage error, reported, with its exit status.
func oneRunID(fs *flag.FlagSet, e env, pos []string) (id int64, code int, ok bool) {
	if len(pos) != 1 {
		return 0, usageError(fs, e, "%s takes one run id", fs.Name()), false
	}
	if id, ok = runIDArg(pos[0]); !ok {
		return 0, usageError(fs, e, "%q is not a run id", pos[0]), false
	}
	return id, 0, true
}

// loadRun reads one run of the history, reporting a missing one.
func loadRun(ctx context.Context, e env, st *store.Store, dir string, id int64) (*trainer.Run, int) {
	r, err := st.Run(ctx, id)
	if errors.Is(err, history.ErrNotFound) {
		return nil, errorf(e, "run %d not found in %s", id, dir)
	}
	if err != nil {
		return nil, errorf(e, "%v", err)
	}
	return r, exitOK
}

func cmdCompare(ctx context.Context, args []string, e env) int {
	fs := newFlags("compare", "A B [C …] [--metric NAME|memory] [--x step|time] [-o FILE.png]", e)
	var cf configFlags
	cf.register(fs, false)
	metric := fs.String("metric", "", "metric to compare, or memory (default: loss, or the loss every run logged, and memory)")
	x := fs.String("x", "", "X axis of the charts: step or time since each run started (default: step for metrics, time for memory)")
	out := fs.String("o", "", "output PNG file (default compare-A-B.png; the memory chart of a comparison without --metric goes next to it, FILE-memory.png)")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) < 2 {
		return usageError(fs, e, "compare takes two or more run ids")
	}
	if len(pos) > 8 {
		return usageError(fs, e, "compare takes at most 8 runs")
	}
	ids := make([]int64, len(pos))
	for i, p := range pos {
		id, ok := runIDArg(p)
		if !ok {
			return usageError(fs, e, "%q is not a run id", p)
		}
		ids[i] = id
	}
	xTime, err := xFlag(*x)
	if err != nil {
		return usageError(fs, e, "%v", err)
	}
	charts, st, dataDir, code := openCharts(e, cf)
	if st == nil {
		return code
	}
	defer st.Close()
	runs := make([]*trainer.Run, len(ids))
	for i, id := range ids {
		if runs[i], code = loadRun(ctx, e, st, dataDir, id); runs[i] == nil {
			return code
		}
	}
	o := render.LossOptions{Metric: *metric, XTime: xTime, XStep: *x == "step"}
	var imgs []chat.Image
	var text string
	switch {
	case strings.EqualFold(*metric, "memory"):
		o.Metric = ""
		var img chat.Image
		img, text, err = charts.CompareMemory(ctx, runs, o)
		imgs = []chat.Image{img}
	case *metric != "":
		var img chat.Image
		img, text, err = charts.Compare(ctx, runs, o)
		imgs = []chat.Image{img}
	default:
		imgs, text, err = charts.CompareAll(ctx, runs, o)
	}
	if err != nil {
		return errorf(e, "%v", err)
	}
	fmt.Fprintln(e.stdout, termsafe.String(text))
	for i, img := range imgs {
		if img.PNG == nil {
			continue
		}
		path := img.Name
		if *out != "" {
			path = *out
			if i > 0 {
				path = strings.TrimSuffix(path, ".png") + "-memory.png"
			}
		}
		if err := os.WriteFile(path, img.PNG, 0o644); err != nil {
			return errorf(e, "write chart: %v", err)
		}
		fmt.Fprintf(e.stdout, "%s (%s)\n", path, img.Caption)
	}
	return exitOK
}

// openCharts loads the config, the chart fonts and the store of the data
// directory for plot and compare. st is nil after an error (reported; code
// is the exit status).
func openCharts(e env, cf configFlags) (charts render.Charts, st *store.Store, dataDir string, code int) {
	cfg, _, code := cf.load(e)
	if cfg == nil {
		return render.Charts{}, nil, "", code
	}
	painter, err := newPainter(cfg.Plots)
	if err != nil {
		return render.Charts{}, nil, "", errorf(e, "%v", err)
	}
	st, code = openStore(e, cfg.DataDir)
	if st == nil {
		return render.Charts{}, nil, "", code
	}
	return render.Charts{Data: st, Painter: painter, Smoothing: chartSmoothing(cfg.Plots)}, st, cfg.DataDir, exitOK
}
