package gpu

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"
)

// A snapshot survives `trainbot gpu --json` and back as far as the JSON
// carries it.
func TestJSONRoundTrip(t *testing.T) {
	g, total, host := int64(3<<30), int64(8<<30), int64(1<<20)
	s := Snapshot{At: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), Available: true, Driver: "550.1",
		Devices: []Device{{Index: 0, Name: "NVIDIA H100", UUID: "GPU-0", MemUsed: 2 << 30, MemReserved: 1 << 30, MemTotal: 8 << 30,
			Util: 0, MemUtil: -1, TempC: 40, PowerMilliW: 123400, PowerLimitMilliW: 700000}},
		Processes: []Process{{PID: 5, Device: 0, MemUsed: 3 << 30, RunID: 2, Name: "python", UID: -1, Command: "python x.py", Util: -1}},
		Host:      Host{MemTotal: 100, MemAvailable: 30},
		Runs:      []RunUsage{{RunID: 2, PID: 5, GPUBytes: &g, GPUTotal: &total, Devices: []int{0}, HostBytes: &host, Processes: 2}}}
	b, err := json.Marshal(ToJSON(s, errors.New("no /proc/5")))
	if err != nil {
		t.Fatal(err)
	}
	var j JSON
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	got, err := j.Snapshot()
	if err == nil || err.Error() != "no /proc/5" {
		t.Errorf("error = %v, want the partial one", err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Errorf("got  %+v\nwant %+v", got, s)
	}
}
