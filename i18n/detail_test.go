package i18n

import "testing"

// The detail messages' English is the supervisor's own (trainer's
// EndFacts.English writes the same words): a chat in English shows the
// record as it is.
func TestDetailMessagesHaveBothLanguages(t *testing.T) {
	for _, m := range []Msg{DetailExit, DetailKilledBy, DetailStderr, DetailRecovered, DetailStoppedNaN, DetailNoStart, DetailStrayKill,
		DetailStoppedBy, DetailKilledNow, DetailKilledGrace, DetailEndedBy, DetailExitIn, DetailSep} {
		if m.EN == "" || m.ZH == "" || m.EN == m.ZH {
			t.Errorf("%s: EN %q ZH %q", m.Key, m.EN, m.ZH)
		}
	}
}
