package trainer

import "testing"

func TestRaisePeakHost(t *testing.T) {
	steps := []struct {
		bytes    int64
		how      string
		want     int64
		wantHow  string
		scenario string
	}{
		{300, PeakSampled, 300, PeakSampled, "a first sample"},
		{280, PeakMain, 300, PeakMain, "a high-water mark is at least the samples"},
		{400, PeakMain, 400, PeakMain, "a higher mark raises it"},
		{350, PeakMain, 400, PeakMain, "a lower mark does not lower it"},
		{900, PeakSampled, 400, PeakMain, "samples never replace a mark"},
		{500, PeakTreeSum, 500, PeakTreeSum, "a sum over several processes"},
		{800, PeakMain, 500, PeakTreeSum, "the main process alone says less than the sum"},
		{450, PeakCgroup, 450, PeakCgroup, "the cgroup's peak is exact, also when lower than the sum"},
	}
	var r Run
	for _, s := range steps {
		if s.how == PeakSampled {
			r.raisePeakSampled(s.bytes)
		} else {
			r.raisePeakHost(s.bytes, s.how)
		}
		if r.PeakHostMem == nil || *r.PeakHostMem != s.want || r.PeakHostHow != s.wantHow {
			t.Fatalf("%s: got %v %q, want %d %q", s.scenario, r.PeakHostMem, r.PeakHostHow, s.want, s.wantHow)
		}
	}
}
