package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPlotsSection(t *testing.T) {
	dir := t.TempDir()
	font := filepath.Join(dir, "cjk.ttc")
	if err := os.WriteFile(font, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		toml string
		want string // "" for valid
	}{
		{"[plots]\nsmoothing = 0.9\nfont = \"\"", ""},
		{"[plots]\nsmoothing = 0\nfont = \"none\"", ""},
		{"[plots]\nfont = \"" + font + "\"", ""},
		{"[plots]\nsmoothing = 1", "t.toml:2: plots.smoothing: want a number in [0, 1), got 1"},
		{"[plots]\nsmoothing = -0.1", "t.toml:2: plots.smoothing: want a number in [0, 1), got -0.1"},
		{"[plots]\n\nfont = \"/no/such/font.ttc\"", "t.toml:3: plots.font: stat /no/such/font.ttc: no such file or directory"},
		{"[plots]\nfont = \"" + dir + ".ttf\"", "no such file"},
		{"[plots]\nfont = \"Noto Sans CJK\"", `plots.font: "Noto Sans CJK" is not a font file`},
		{"[plots]\nfont = 3", "plots.font"},
	} {
		cfg := DefaultConfig()
		err := cfg.Parse("t.toml", strings.NewReader(c.toml))
		if err == nil {
			err = cfg.Validate()
		}
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.toml, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: err %v, want %q", c.toml, err, c.want)
		}
	}
	cfg := DefaultConfig()
	if cfg.Plots.Smoothing != 0.6 || cfg.Plots.Font != "" {
		t.Errorf("defaults %+v", cfg.Plots)
	}
	if err := cfg.ApplyEnv([]string{"TRAINBOT_PLOTS_FONT=none"}); err != nil || cfg.Plots.Font != "none" {
		t.Errorf("TRAINBOT_PLOTS_FONT: %v, %q", err, cfg.Plots.Font)
	}
}
