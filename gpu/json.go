package gpu

import (
	"errors"
	"time"
)

// JSON is `trainbot gpu --json`, the snapshot as another trainbot reads
// it: the hub samples a host's GPUs by running the host's `trainbot gpu
// --json` (gpu/remote), so ToJSON and Snapshot are the one encoding and
// its inverse. Field names are a contract: extend, never rename.
type JSON struct {
	Available bool `json:"available"`
	// Reason says why there are no device figures ("" when available).
	Reason    string        `json:"reason"`
	Why       Why           `json:"why,omitempty"`
	Driver    string        `json:"driver_version"`
	SampledAt time.Time     `json:"sampled_at"`
	Devices   []DeviceJSON  `json:"devices"`
	Processes []ProcessJSON `json:"processes"`
	Host      HostJSON      `json:"host"`
	Runs      []RunJSON     `json:"runs"`
	// Error is what could not be read this time ("" when everything was).
	Error string `json:"error"`
}

// DeviceJSON is one device of JSON.
type DeviceJSON struct {
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

// ProcessJSON is one holder of JSON.
type ProcessJSON struct {
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

// HostJSON is the host's memory in JSON.
type HostJSON struct {
	MemoryTotalBytes     uint64 `json:"memory_total_bytes"`
	MemoryAvailableBytes uint64 `json:"memory_available_bytes"`
	MemoryUsedBytes      uint64 `json:"memory_used_bytes"`
}

// RunJSON is one run of JSON (of the answering trainbot's store).
type RunJSON struct {
	RunID         int64  `json:"run_id"`
	PID           int    `json:"pid"`
	GPUMemBytes   *int64 `json:"gpu_mem_bytes"`   // null without device figures
	GPUTotalBytes *int64 `json:"gpu_total_bytes"` // null when it uses no device
	Devices       []int  `json:"devices"`
	HostMemBytes  *int64 `json:"host_mem_bytes"` // resident memory of the run's process tree
	Processes     int    `json:"processes"`
}

// ToJSON is s as `trainbot gpu --json` prints it, err (what could not be
// read) in Error.
func ToJSON(s Snapshot, err error) JSON {
	j := JSON{Available: s.Available, Reason: s.Reason, Why: s.Why, Driver: s.Driver, SampledAt: s.At.UTC(),
		Devices: []DeviceJSON{}, Processes: []ProcessJSON{}, Runs: []RunJSON{},
		Host: HostJSON{MemoryTotalBytes: s.Host.MemTotal, MemoryAvailableBytes: s.Host.MemAvailable, MemoryUsedBytes: s.Host.Used()}}
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
		j.Devices = append(j.Devices, DeviceJSON{Index: d.Index, Name: d.Name, UUID: d.UUID,
			MemoryUsedBytes: d.MemUsed + d.MemReserved, MemoryReservedBytes: d.MemReserved, MemoryTotalBytes: d.MemTotal,
			UtilizationPercent: known(d.Util), MemoryUtilPercent: known(d.MemUtil), TemperatureC: known(d.TempC),
			PowerDrawWatts: watts(d.PowerMilliW), PowerLimitWatts: watts(d.PowerLimitMilliW)})
	}
	for _, p := range s.Processes {
		pj := ProcessJSON{PID: p.PID, Device: p.Device, Name: p.Name, MemoryUsedBytes: p.MemUsed,
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
		j.Runs = append(j.Runs, RunJSON{RunID: u.RunID, PID: u.PID, GPUMemBytes: u.GPUBytes, GPUTotalBytes: u.GPUTotal,
			Devices: devs, HostMemBytes: u.HostBytes, Processes: u.Processes})
	}
	if err != nil {
		j.Error = err.Error()
	}
	return j
}

// Snapshot is j back as a snapshot, as far as JSON carries one: no
// Unanswered devices, Topology, holders' Since or runs' HWM and cgroup
// peak. The error is j's Error ("" is nil).
func (j JSON) Snapshot() (Snapshot, error) {
	s := Snapshot{At: j.SampledAt, Available: j.Available, Reason: j.Reason, Why: j.Why, Driver: j.Driver,
		Host: Host{MemTotal: j.Host.MemoryTotalBytes, MemAvailable: j.Host.MemoryAvailableBytes}}
	unknown := func(p *int) int {
		if p == nil {
			return -1
		}
		return *p
	}
	milliW := func(w *float64) uint64 {
		if w == nil || *w <= 0 {
			return 0
		}
		return uint64(*w*1000 + 0.5)
	}
	for _, d := range j.Devices {
		used := d.MemoryUsedBytes - min(d.MemoryReservedBytes, d.MemoryUsedBytes)
		s.Devices = append(s.Devices, Device{Index: d.Index, Name: d.Name, UUID: d.UUID,
			MemUsed: used, MemReserved: d.MemoryReservedBytes, MemTotal: d.MemoryTotalBytes,
			Util: unknown(d.UtilizationPercent), MemUtil: unknown(d.MemoryUtilPercent), TempC: unknown(d.TemperatureC),
			PowerMilliW: milliW(d.PowerDrawWatts), PowerLimitMilliW: milliW(d.PowerLimitWatts)})
	}
	for _, p := range j.Processes {
		pr := Process{PID: p.PID, Device: p.Device, Name: p.Name, MemUsed: p.MemoryUsedBytes,
			UID: unknown(p.UID), User: p.User, Command: p.Command, Util: unknown(p.UtilizationPercent)}
		if p.RunID != nil {
			pr.RunID = *p.RunID
		}
		s.Processes = append(s.Processes, pr)
	}
	for _, u := range j.Runs {
		s.Runs = append(s.Runs, RunUsage{RunID: u.RunID, PID: u.PID, GPUBytes: u.GPUMemBytes, GPUTotal: u.GPUTotalBytes,
			Devices: u.Devices, HostBytes: u.HostMemBytes, Processes: u.Processes})
	}
	if j.Error != "" {
		return s, errors.New(j.Error)
	}
	return s, nil
}

// HostSample is what is known of another host's GPUs ([[hosts]]): its
// newest answer and, when it stopped answering, since when and why
// (gpu/remote samples it; bot/render words it for 显卡).
type HostSample struct {
	// Host is the [[hosts]] name.
	Host string
	// Snapshot is the newest answer (At is when the host sampled it),
	// zero when the host has not answered yet. Partial is what that
	// answer could not read, nil when it read everything.
	Snapshot Snapshot
	Partial  error
	// Unreachable is why the last try got no answer (the connection is
	// down, the command failed, what it printed was no sample); nil while
	// the host answers. Since is the first try that got none after the
	// last answer (or after the sampling started).
	Unreachable error
	Since       time.Time
}
