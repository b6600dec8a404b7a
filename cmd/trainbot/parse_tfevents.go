package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/trainbot/trainbot/internal/units"
	"github.com/trainbot/trainbot/trainer/tfevents"
)

// tfeventsPointJSON is one point of `trainbot parse --tfevents DIR --json`:
// parse --json's fields, the event's wall time, and the file it came from.
type tfeventsPointJSON struct {
	pointJSON
	Time string `json:"time"`
	File string `json:"file"`
}

// parseTFEvents shows what trainbot reads from the event files under dir
// (or from one event file): every scalar point in file order, then a
// summary with what was skipped.
func parseTFEvents(ctx context.Context, dir string, asJSON bool, e env) int {
	fi, err := os.Stat(dir)
	if err != nil {
		return errorf(e, "%v", err)
	}
	root, only := dir, ""
	if !fi.IsDir() {
		root, only = filepath.Dir(dir), filepath.Base(dir)
	}
	warnings := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	d := tfevents.NewDir(root, nil, warnings)
	out := bufio.NewWriterSize(e.stdout, 64<<10)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	var metrics metricTally
	points, records := 0, 0
	var bytesRead int64
	var writeErr error
	began := time.Now()
	// Until the files have nothing more (a writer still adding to them is
	// read until it pauses; 64 MiB a round, 2¹⁶ rounds at most).
	for round := 0; round < 1<<16 && ctx.Err() == nil; round++ {
		n := d.Poll(64<<20, func(r tfevents.DirRecord) {
			if only != "" && r.File.Rel != only {
				return
			}
			records++
			for _, s := range r.Scalars {
				name := tfevents.MetricName(r.File.Sub(), s.Tag)
				points++
				metrics.add(name, s.Value)
				if writeErr != nil {
					continue
				}
				at := time.Unix(0, int64(s.WallTime*1e9)).UTC().Format(time.RFC3339Nano)
				if asJSON {
					writeErr = enc.Encode(tfeventsPointJSON{pointJSON: pointJSON{Step: s.Step, Name: name, Value: jsonValue(s.Value)}, Time: at, File: r.File.Rel})
				} else {
					_, writeErr = fmt.Fprintf(out, "%s  step %d  %s  %s = %s\n", r.File.Rel, s.Step, at, name, formatValue(s.Value))
				}
			}
		})
		bytesRead += n
		if n == 0 {
			break
		}
	}
	elapsed := time.Since(began)
	if !asJSON && writeErr == nil {
		fmt.Fprintf(out, "-- %d event files, %d records with scalars, %d points found (%s read in %s)\n",
			len(d.Files), records, points, units.Bytes(bytesRead), elapsed.Round(time.Millisecond))
		metrics.write(out)
		for _, rel := range slices.Sorted(maps.Keys(d.Files)) {
			f := d.Files[rel]
			if f.Corrupt > 0 {
				fmt.Fprintf(out, "%s: %d corrupt stretch(es) skipped\n", rel, f.Corrupt)
			}
			if f.Torn > 0 {
				fmt.Fprintf(out, "%s: its last record is incomplete (%d bytes): a running trainbot waits for the rest\n", rel, f.Torn)
			}
		}
	}
	if err := out.Flush(); err != nil && writeErr == nil {
		writeErr = err
	}
	if writeErr != nil {
		return errorf(e, "write: %v", writeErr)
	}
	if err := ctx.Err(); err != nil {
		return errorf(e, "%v", err)
	}
	if len(d.Files) == 0 {
		return errorf(e, "no %s* files in %s", tfevents.FilePrefix, dir)
	}
	return exitOK
}

// jsonValue is a value for JSON: NaN and ±Inf as parse --json writes them.
func jsonValue(v float64) any {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return formatValue(v)
	}
	return v
}
