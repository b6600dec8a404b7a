package journal

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestJournalPriorities(t *testing.T) {
	for _, c := range []struct{ level, want string }{
		{"DEBUG", "<7>"}, {"DEBUG+2", "<7>"}, {"INFO", "<6>"}, {"WARN", "<4>"}, {"ERROR", "<3>"}, {"ERROR+4", "<3>"},
	} {
		if got := priority(c.level); got != c.want {
			t.Errorf("priority(%q) = %q, want %q", c.level, got, c.want)
		}
	}
}

// TestUnderJournal: JOURNAL_STREAM counts when stderr is the stream it
// names (its device and inode), not when stderr was redirected elsewhere.
func TestUnderJournal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	same := fmt.Sprintf("JOURNAL_STREAM=%d:%d", st.Dev, st.Ino)
	for _, c := range []struct {
		environ []string
		stderr  io.Writer
		want    bool
	}{
		{[]string{same}, f, true},
		{[]string{fmt.Sprintf("JOURNAL_STREAM=%d:%d", st.Dev, st.Ino+1)}, f, false},
		{nil, f, false},
		{[]string{"JOURNAL_STREAM="}, &bytes.Buffer{}, false},
		{[]string{"JOURNAL_STREAM=8:123"}, &bytes.Buffer{}, true},
	} {
		if got := Under(c.environ, c.stderr); got != c.want {
			t.Errorf("Under(%q, %T) = %v, want %v", c.environ, c.stderr, got, c.want)
		}
	}
}
