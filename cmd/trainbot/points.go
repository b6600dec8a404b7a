package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/trainbot/trainbot/history"
	"github.com/trainbot/trainbot/internal/termsafe"
	"github.com/trainbot/trainbot/trainer/logparse"
)

// storedPointJSON is a point in `trainbot points --json`: a point of
// `trainbot parse --json` (the same field names and NaN/Inf strings) with
// the time its line was written.
type storedPointJSON struct {
	pointJSON
	Time time.Time `json:"time"`
}

func cmdPoints(ctx context.Context, args []string, e env) int {
	fs := newFlags("points", "ID [--metric NAME] [--json|--csv]", e)
	var cf configFlags
	cf.register(fs, false)
	metric := fs.String("metric", "", "only this metric (default: every metric of the run)")
	asJSON := fs.Bool("json", false, "print a JSON array of {step, epoch, name, value, time}, as parse --json")
	asCSV := fs.Bool("csv", false, "print CSV with a header: step,time,name,value,epoch (pandas.read_csv reads it)")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	id, code, ok := oneRunID(fs, e, pos)
	if !ok {
		return code
	}
	if *asJSON && *asCSV {
		return usageError(fs, e, "--json or --csv, not both")
	}
	st, cfg, code := openHistory(e, cf)
	if st == nil {
		return code
	}
	defer st.Close()
	r, code := loadRun(ctx, e, st, cfg.DataDir, id)
	if r == nil {
		return code
	}
	names, err := st.MetricNames(ctx, r.ID)
	if err != nil {
		return errorf(e, "%v", err)
	}
	if m := strings.ToLower(*metric); m != "" {
		if !slices.Contains(names, m) {
			if len(names) == 0 {
				return errorf(e, "run #%d has no metric yet", r.ID)
			}
			return errorf(e, "run #%d has no metric %q; it has %s", r.ID, *metric, strings.Join(names, ", "))
		}
		names = []string{m}
	}
	var pw pointWriter
	switch {
	case *asJSON:
		pw = &jsonPoints{w: bufio.NewWriter(e.stdout)}
	case *asCSV:
		w := csv.NewWriter(e.stdout)
		w.Write([]string{"step", "time", "name", "value", "epoch"})
		pw = csvPoints{w}
	default:
		w := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "step\ttime\tname\tvalue\tepoch")
		pw = textPoints{w}
	}
	for _, n := range names {
		pts, err := st.Series(ctx, r.ID, n)
		if err != nil {
			return errorf(e, "%v", err)
		}
		for _, p := range pts {
			pw.point(n, p)
		}
	}
	if err := pw.flush(); err != nil {
		return errorf(e, "write points: %v", err)
	}
	return exitOK
}

// pointWriter prints points in one of the formats.
type pointWriter interface {
	point(name string, p history.Point)
	flush() error
}

// jsonPoints prints an array with a point per line.
type jsonPoints struct {
	w *bufio.Writer
	n int
}

func (j *jsonPoints) point(name string, p history.Point) {
	b, _ := json.Marshal(storedPointJSON{toPointJSON(logparse.Point{Step: p.Step, Epoch: p.Epoch, Name: name, Value: p.Value}), time.UnixMilli(p.T).UTC()})
	sep := ",\n"
	if j.n == 0 {
		sep = "[\n"
	}
	j.n++
	j.w.WriteString(sep)
	j.w.Write(b)
}

func (j *jsonPoints) flush() error {
	if j.n == 0 {
		j.w.WriteString("[")
	}
	j.w.WriteString("\n]\n")
	return j.w.Flush()
}

type csvPoints struct{ w *csv.Writer }

func (c csvPoints) point(name string, p history.Point) {
	epoch := ""
	if !math.IsNaN(p.Epoch) {
		epoch = formatValue(p.Epoch)
	}
	c.w.Write([]string{strconv.FormatInt(p.Step, 10), pointTime(p), name, formatValue(p.Value), epoch})
}

func (c csvPoints) flush() error {
	c.w.Flush()
	return c.w.Error()
}

type textPoints struct{ w *tabwriter.Writer }

func (t textPoints) point(name string, p history.Point) {
	epoch := "-"
	if !math.IsNaN(p.Epoch) {
		epoch = formatValue(p.Epoch)
	}
	fmt.Fprintf(t.w, "%d\t%s\t%s\t%s\t%s\n", p.Step, pointTime(p), termsafe.Field(name), formatValue(p.Value), epoch)
}

func (t textPoints) flush() error { return t.w.Flush() }

// pointTime is the point's time in UTC, to the millisecond.
func pointTime(p history.Point) string {
	return time.UnixMilli(p.T).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}
