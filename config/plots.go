package config

import (
	"os"
	"path/filepath"
	"strings"
)

// validatePlots checks the [plots] section.
func (c *Config) validatePlots() Errors {
	var errs Errors
	p := c.Plots
	if p.Smoothing < 0 || p.Smoothing >= 1 {
		errs = append(errs, c.ErrorAt("plots.smoothing", "want a number in [0, 1), got %g", p.Smoothing))
	}
	if f := strings.TrimSpace(p.Font); f != "" && f != "none" {
		switch strings.ToLower(filepath.Ext(f)) {
		case ".ttf", ".otf", ".ttc", ".otc":
		default:
			errs = append(errs, c.ErrorAt("plots.font", "%q is not a font file: want a .ttf, .otf, .ttc or .otc file, \"\" to look for one, or \"none\"", p.Font))
			return errs
		}
		st, err := os.Stat(ExpandHome(f))
		switch {
		case err != nil:
			errs = append(errs, c.ErrorAt("plots.font", "%v (Debian: apt install fonts-noto-cjk or fonts-wqy-zenhei; or set font = \"\" to look for one)", err))
		case !st.Mode().IsRegular():
			errs = append(errs, c.ErrorAt("plots.font", "%q is not a regular file", p.Font))
		}
	}
	return errs
}
