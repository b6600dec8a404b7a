package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/trainbot/trainbot/bot/render"
	"github.com/trainbot/trainbot/config"
	"github.com/trainbot/trainbot/gpu"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/internal/procfs"
	"github.com/trainbot/trainbot/internal/termsafe"
	"github.com/trainbot/trainbot/store"
)

// gpuJSON is `trainbot gpu --json`. Field names are a contract.
type gpuJSON struct {
	Available bool `json:"available"`
	// Reason says why there are no device figures ("" when available).
	Reason    string          `json:"reason"`
	Driver    string          `json:"driver_version"`
	SampledAt time.Time       `json:"sampled_at"`
	Devices   []gpuDeviceJSON `json:"devices"`
	Processes []gpuProcJSON   `json:"processes"`
	Host      gpuHostJSON     `json:"host"`
	Runs      []gpuRunJSON    `json:"runs"`
	// Error is what could not be read this time ("" when everything was).
	Error string `json:"error"`
}

type gpuDeviceJSON struct {
	Index               int      `json:"index"`
	Name                string   `json:"name"`
	UUID                string   `json:"uuid"`
	MemoryUsedBytes     uint64   `json:"memory_used_bytes"`     // allocated plus reserved: not free
	MemoryReservedBytes uint64   `json:"memory_reserved_bytes"` // by the driver (NVML v2), 0 when unknown
	MemoryTotalBytes    uint64   `json:"memory_total_bytes"`
	UtilizationPercent  *int     `json:"utilization_percent"`        // null when unknown
	MemoryUtilPercent   *int     `json:"memory_utilization_percent"` // null when unknown
	TemperatureC        *int     `json:"temperature_c"`              // null when unknown
	PowerDrawWatts      *float64 `json:"power_draw_watts"`           // null when unknown
	PowerLimitWatts     *float64 `json:"power_limit_watts"`          // null when unknown
}

type gpuProcJSON struct {
	PID             int    `json:"pid"`
	Device          int    `json:"device"`
	Name            string `json:"name"`
	MemoryUsedBytes uint64 `json:"memory_used_bytes"`
	RunID           *int64 `json:"run_id"`  // null when no run owns it
	UID             *int   `json:"uid"`     // null when unknown
	User            string `json:"user"`    // the uid's name, or the uid; "" when unknown
	Command         string `json:"command"` // the command line, cut to 120 characters; "" when unknown
	// UtilizationPercent is the process's SM utilisation; null when unknown.
	UtilizationPercent *int `json:"utilization_percent"`
}

type gpuHostJSON struct {
	MemoryTotalBytes     uint64 `json:"memory_total_bytes"`
	MemoryAvailableBytes uint64 `json:"memory_available_bytes"`
	MemoryUsedBytes      uint64 `json:"memory_used_bytes"`
}

type gpuRunJSON struct {
	RunID         int64  `json:"run_id"`
	PID           int    `json:"pid"`
	GPUMemBytes   *int64 `json:"gpu_mem_bytes"`   // null without device figures
	GPUTotalBytes *int64 `json:"gpu_total_bytes"` // null when it uses no device
	Devices       []int  `json:"devices"`
	HostMemBytes  *int64 `json:"host_mem_bytes"` // resident memory of the run's process tree
	Processes     int    `json:"processes"`
}

func toGPUJSON(s gpu.Snapshot, err error) gpuJSON {
	j := gpuJSON{Available: s.Available, Reason: s.Reason, Driver: s.Driver, SampledAt: s.At.UTC(),
		Devices: []gpuDeviceJSON{}, Processes: []gpuProcJSON{}, Runs: []gpuRunJSON{},
		Host: gpuHostJSON{MemoryTotalBytes: s.Host.MemTotal, MemoryAvailableBytes: s.Host.MemAvailable, MemoryUsedBytes: s.Host.Used()}}
	known := func(v int) *int {
		if v < 0 {
			return nil
		}
		return &v
	}
	watts := func(mw uint64) *float64 {
		if mw == 0 {
			return nil
		}
		w := float64(mw) / 1000
		return &w
	}
	for _, d := range s.Devices {
		j.Devices = append(j.Devices, gpuDeviceJSON{Index: d.Index, Name: d.Name, UUID: d.UUID,
			MemoryUsedBytes: d.MemUsed + d.MemReserved, MemoryReservedBytes: d.MemReserved, MemoryTotalBytes: d.MemTotal,
			UtilizationPercent: known(d.Util), MemoryUtilPercent: known(d.MemUtil), TemperatureC: known(d.TempC),
			PowerDrawWatts: watts(d.PowerMilliW), PowerLimitWatts: watts(d.PowerLimitMilliW)})
	}
	for _, p := range s.Processes {
		pj := gpuProcJSON{PID: p.PID, Device: p.Device, Name: p.Name, MemoryUsedBytes: p.MemUsed,
			UID: known(p.UID), User: p.User, Command: p.Command, UtilizationPercent: known(p.Util)}
		if p.RunID != 0 {
			id := p.RunID
			pj.RunID = &id
		}
		j.Processes = append(j.Processes, pj)
	}
	for _, u := range s.Runs {
		devs := u.Devices
		if devs == nil {
			devs = []int{}
		}
		j.Runs = append(j.Runs, gpuRunJSON{RunID: u.RunID, PID: u.PID, GPUMemBytes: u.GPUBytes, GPUTotalBytes: u.GPUTotal,
			Devices: devs, HostMemBytes: u.HostBytes, Processes: u.Processes})
	}
	if err != nil {
		j.Error = err.Error()
	}
	return j
}

func cmdGPU(ctx context.Context, args []string, e env) int {
	fs := newFlags("gpu", "[--json]", e)
	var cf configFlags
	cf.register(fs, false)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return usageError(fs, e, "unexpected argument %q", pos[0])
	}
	cfg, _, code := cf.load(e)
	if cfg == nil {
		return code
	}
	runs, about, err := runningPGIDs(ctx, cfg.DataDir)
	if err != nil {
		return errorf(e, "%v", err)
	}
	b, _ := gpu.Open() // without NVML: a backend that says why
	defer b.Close()
	snap, err := gpu.Collect(ctx, b, runs)
	if *asJSON {
		if code := printJSON(e, toGPUJSON(snap, err)); code != exitOK {
			return code
		}
	} else {
		fmt.Fprintln(e.stdout, termsafe.String(render.GPUTable(i18n.ZhEn, snap, about))) // other users' process names
	}
	if err != nil {
		// What was read is printed; what was not makes the status 1.
		return errorf(e, "gpu: %v", err)
	}
	return exitOK
}

// runningPGIDs maps the process group of every run the store of dataDir
// records as running, and that is still alive, to its run id, so that
// `trainbot gpu` can attribute memory while a bot runs; about has each
// such run's job and starter, for the table. No data directory means no
// runs.
func runningPGIDs(ctx context.Context, dataDir string) (pgids map[int]int64, about map[int64]render.GPURun, err error) {
	if _, err := os.Stat(dataDir); err != nil {
		return nil, nil, nil
	}
	st, err := store.Open(dataDir, store.Options{})
	if err != nil {
		return nil, nil, err
	}
	defer st.Close()
	runs, err := st.RunningRuns(ctx)
	if err != nil || len(runs) == 0 {
		return nil, nil, err
	}
	procs, err := procfs.ReadProcs()
	if err != nil {
		return nil, nil, err
	}
	out := map[int]int64{}
	about = map[int64]render.GPURun{}
	for _, r := range runs {
		if r.PID <= 0 || r.Host != "" || !procs.Alive(r.PID) { // a run on another host has its pid there
			continue
		}
		// A run left "running" by a trainbot that died may name a PID that
		// now belongs to a newer process.
		if started, ok := procs.Started(r.PID); ok && started.After(r.StartedAt.Add(5*time.Second)) {
			continue
		}
		out[r.PID] = r.ID
		about[r.ID] = render.GPURun{Job: r.Job, By: r.StartedBy}
	}
	return out, about, nil
}

// gpuThresholds are the monitor's alert thresholds from [gpu]: idle_held
// off unless asked for.
func gpuThresholds(c config.GPUConfig) gpu.Thresholds {
	th := gpu.Thresholds{MemoryPercent: c.MemoryAlert, TempC: c.TempAlert}
	if c.IdleHeld {
		th.IdleMemory, th.IdleFor = uint64(c.IdleMemory), time.Duration(c.IdleFor)
	}
	return th
}
