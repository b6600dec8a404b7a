// Package gpu samples accelerator and host memory for trainbot: per device
// its name, memory, utilisation, temperature and power, and per process the
// memory it holds, so that memory can be attributed to the run whose process
// group owns the process.
//
// Sampler is the one interface the rest of trainbot uses; backends live
// beside it. HostMemory reads /proc/meminfo and works everywhere on Linux.
package gpu

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// ErrUnavailable is returned by a backend that cannot sample on this host
// (for NVML: no NVIDIA driver).
var ErrUnavailable = errors.New("gpu: not available")

// Device is one accelerator at one instant.
type Device struct {
	Index            int
	Name             string
	UUID             string
	MemUsed          uint64 // bytes
	MemTotal         uint64 // bytes
	Util             int    // percent, -1 when unknown
	MemUtil          int    // percent, -1 when unknown
	TempC            int    // degrees Celsius, -1 when unknown
	PowerMilliW      uint64 // 0 when unknown
	PowerLimitMilliW uint64 // 0 when unknown
}

// Process is the memory one process holds on one device.
type Process struct {
	PID     int
	Device  int
	MemUsed uint64 // bytes
	RunID   int64  // the run whose process group holds the PID, 0 if none
}

// Snapshot is one sample of every device.
type Snapshot struct {
	At        time.Time
	Devices   []Device
	Processes []Process
	Host      Host
}

// Host is the machine's memory.
type Host struct {
	MemTotal     uint64 // bytes
	MemAvailable uint64 // bytes
}

// Sampler takes snapshots.
type Sampler interface {
	// Sample returns the current state of the devices. A backend that cannot
	// sample on this host returns an error wrapping ErrUnavailable.
	Sample(ctx context.Context) (Snapshot, error)
}

// HostMemory reads the host's memory from /proc/meminfo.
func HostMemory() (Host, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return Host{}, fmt.Errorf("host memory: %w", err)
	}
	defer f.Close()
	return parseMeminfo(f)
}

func parseMeminfo(r io.Reader) (Host, error) {
	var h Host
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			continue
		}
		if len(fields) > 1 && fields[1] == "kB" {
			v *= 1024
		}
		switch name {
		case "MemTotal":
			h.MemTotal = v
		case "MemAvailable":
			h.MemAvailable = v
		}
	}
	if err := sc.Err(); err != nil {
		return Host{}, err
	}
	if h.MemTotal == 0 {
		return Host{}, errors.New("host memory: no MemTotal in /proc/meminfo")
	}
	return h, nil
}
