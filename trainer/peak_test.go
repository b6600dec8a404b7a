package trainer

import (
	"testing"

	"github.com/trainbot/trainbot/history"
)

func TestRaisePeakHost(t *testing.T) {
	steps := []struct {
		bytes    int64
		how      string
		want     int64
		wantHow  string
		scenario string
	}{
		{300, history.PeakSampled, 300, history.PeakSampled, "a first sample"},
		{280, history.PeakMain, 300, history.PeakMain, "a high-water mark is at least the samples"},
		{400, history.PeakMain, 400, history.PeakMain, "a higher mark raises it"},
		{350, history.PeakMain, 400, history.PeakMain, "a lower mark does not lower it"},
		{900, history.PeakSampled, 400, history.PeakMain, "samples never replace a mark"},
		{500, history.PeakTreeSum, 500, history.PeakTreeSum, "a sum over several processes"},
		{800, history.PeakMain, 500, history.PeakTreeSum, "the main process alone says less than the sum"},
		{450, history.PeakCgroup, 450, history.PeakCgroup, "the cgroup's peak is exact, also when lower than the sum"},
	}
	var r Run
	for _, s := range steps {
		if s.how == history.PeakSampled {
			r.raisePeakSampled(s.bytes)
		} else {
			r.raisePeakHost(s.bytes, s.how)
		}
		if r.PeakHostMem == nil || *r.PeakHostMem != s.want || r.PeakHostHow != s.wantHow {
			t.Fatalf("%s: got %v %q, want %d %q", s.scenario, r.PeakHostMem, r.PeakHostHow, s.want, s.wantHow)
		}
	}
}
