//go:build !cgo || nonvml

package gpu

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A build without NVML reports that, and Collect works on host memory.
func TestOpenWithoutNVML(t *testing.T) {
	b, err := Open()
	t.Cleanup(func() { b.Close() })
	if !errors.Is(err, ErrUnavailable) || b.Name() != "none" || !strings.Contains(Reason(err), "built without NVML") {
		t.Fatalf("Open = %s, %v", b.Name(), err)
	}
	pid, _ := startTree(t, "sleep 60 & wait", 1)
	snap, err := Collect(context.Background(), b, map[int]int64{pid: 1})
	if err != nil {
		t.Fatal(err)
	}
	if snap.Available || len(snap.Runs) != 1 || snap.Runs[0].HostBytes == nil || *snap.Runs[0].HostBytes <= 0 {
		t.Errorf("snapshot = %+v", snap)
	}
	// bot/render words the table ("No NVIDIA GPU: " and the reason).
	if !strings.HasPrefix(snap.Reason, "this trainbot was built without NVML") {
		t.Errorf("reason %q", snap.Reason)
	}
}
