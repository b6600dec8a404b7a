package private

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRestrictMakesNewFilesPrivate(t *testing.T) {
	for _, tc := range []struct {
		shared            bool
		wantFile, wantDir os.FileMode
	}{
		{false, 0o600, 0o700},
		{true, 0o640, 0o750},
	} {
		Restrict(tc.shared)
		dir := t.TempDir()
		f := filepath.Join(dir, "f")
		if err := os.WriteFile(f, []byte("x"), 0o666); err != nil {
			t.Fatal(err)
		}
		d := filepath.Join(dir, "d")
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
		for path, want := range map[string]os.FileMode{f: tc.wantFile, d: tc.wantDir} {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != want {
				t.Errorf("shared=%v: %s is %#o, want %#o", tc.shared, filepath.Base(path), got, want)
			}
		}
		if got := Mode(0o644); got != tc.wantFile&0o644 {
			t.Errorf("shared=%v: Mode(0644) = %#o, want %#o", tc.shared, got, tc.wantFile&0o644)
		}
	}
	Restrict(false)
	if _, ok := Original(); !ok {
		t.Error("Original: not remembered after Restrict")
	}
	if Mask() != PrivateMask {
		t.Errorf("Mask() = %#o, want %#o", Mask(), PrivateMask)
	}
}

func TestTightenTakesAwayWhatTheMaskWouldNotGive(t *testing.T) {
	Restrict(false)
	dir := t.TempDir()
	f := filepath.Join(dir, "trainbot.db")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(f, 0o644); err != nil { // as an earlier version left it
		t.Fatal(err)
	}
	if err := Tighten(f); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(f); fi.Mode().Perm() != 0o600 {
		t.Errorf("after Tighten: %#o, want 0600", fi.Mode().Perm())
	}
	if err := Tighten(filepath.Join(dir, "missing")); err != nil {
		t.Errorf("Tighten of a missing file: %v, want nil", err)
	}
}

func TestExposed(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path    string
		mode    os.FileMode
		allowed os.FileMode
		want    string
	}{
		{f, 0o600, 0, ""},
		{f, 0o644, 0, "group and others"},
		{f, 0o640, 0, "group"},
		{f, 0o604, 0, "others"},
		{f, 0o620, 0, ""}, // writable is not readable
		{dir, 0o700, 0, ""},
		{dir, 0o711, 0, "group and others"}, // known names can be opened
		{dir, 0o750, 0o050, ""},
		{dir, 0o755, 0o050, "others"},
	} {
		if err := os.Chmod(tc.path, tc.mode); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := Exposed(fi, tc.allowed); got != tc.want {
			t.Errorf("Exposed(%s %#o, allowed %#o) = %q, want %q", filepath.Base(tc.path), tc.mode, tc.allowed, got, tc.want)
		}
	}
	os.Chmod(dir, 0o700)
}

func TestWithoutSecrets(t *testing.T) {
	environ := []string{"PATH=/usr/bin", "TRAINBOT_TELEGRAM_TOKEN=1:x", "TRAINBOT_RUN_ID=7", "FEISHU_SECRET=s", "FEISHU_SECRET_OTHER=o", "HOME=/home/me", "WEIRD"}
	got := WithoutSecrets(environ, []string{"FEISHU_SECRET"})
	want := []string{"PATH=/usr/bin", "FEISHU_SECRET_OTHER=o", "HOME=/home/me", "WEIRD"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("WithoutSecrets = %q, want %q", got, want)
	}
}
