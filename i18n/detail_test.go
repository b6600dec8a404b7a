package i18n

import (
	"strings"
	"testing"
)

// The detail messages' English is the supervisor's own (trainer's
// EndFacts.English writes the same words; bot/render's tests hold it): a
// chat in English shows the record as it is, a Chinese chat the same facts.
func TestDetailMessagesHaveBothLanguages(t *testing.T) {
	n := 0
	for _, m := range Catalog() {
		if !strings.HasPrefix(m.Key, "detail.") && !strings.HasPrefix(m.Key, "peak.") {
			continue
		}
		n++
		if m.EN == "" || m.ZH == "" || m.EN == m.ZH {
			t.Errorf("%s: EN %q ZH %q", m.Key, m.EN, m.ZH)
		}
	}
	if n < 40 {
		t.Errorf("got %d detail messages in the catalog, want every one of detail.go", n)
	}
}
