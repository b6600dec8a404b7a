package chat

import "testing"

func TestSeverityOf(t *testing.T) {
	cases := map[Severity][]Reply{
		SeverityProgress: {{Kind: KindProgress}, {Kind: KindNotice}, {Kind: KindReply}},
		SeverityInfo:     {{Kind: KindAlert, Alert: AlertFinished}, {Kind: KindAlert, Alert: AlertStopped}, {Kind: KindAlert, Alert: AlertGPUFree}},
		SeverityWarning:  {{Kind: KindAlert, Alert: AlertStalled}, {Kind: KindAlert, Alert: AlertGPU}, {Kind: KindAlert, Alert: AlertSchedule}},
		SeverityCritical: {{Kind: KindAlert, Alert: AlertOOM}, {Kind: KindAlert, Alert: AlertFailed}, {Kind: KindAlert, Alert: AlertNaN}, {Kind: KindAlert, Alert: AlertXid}},
	}
	for want, rs := range cases {
		for _, r := range rs {
			if got := SeverityOf(r); got != want {
				t.Errorf("SeverityOf(%+v) = %v, want %v", r, got, want)
			}
		}
	}
}
