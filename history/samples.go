package history

import "time"

// DeviceSample is one accelerator at one instant.
type DeviceSample struct {
	T           time.Time
	Device      int
	UUID        string
	Name        string
	MemUsed     int64 // bytes
	MemTotal    int64 // bytes
	Util        int   // percent, -1 unknown
	TempC       int   // -1 unknown
	PowerMilliW int64 // 0 unknown
}

// RunMemory is what one run's processes held at one instant.
type RunMemory struct {
	RunID     int64
	T         time.Time
	GPUBytes  *int64 // memory on accelerators held by the run's processes; nil without a GPU
	GPUTotal  *int64 // capacity of the devices the run uses; nil when unknown
	HostBytes *int64 // resident host memory of the run's process tree; nil when not sampled
}
