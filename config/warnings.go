package config

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// exampleUserID is the user id of config.example.toml's operators.
const exampleUserID = 123456789

// shells are the programs whose "-c" argument is a shell script.
var shells = []string{"sh", "bash", "dash", "zsh", "ksh", "ash", "busybox"}

// paramRef finds a "{name}" that is not a literal brace ("{{").
var paramRef = regexp.MustCompile(`(^|[^{])\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// Warnings are what `trainbot check` warns about without failing: a
// config may hold them, but they are most likely mistakes — a value still
// the example's placeholder or user id, the deprecated [telegram]
// progress_interval, a job's program that is not there, a parameter put
// into a shell script. raw is the file as read (nil: its lines are not
// scanned). Each is one line, "warning: " and where it is (file, line,
// key) first.
func (c *Config) Warnings(raw []byte) []string {
	var out []string
	warn := func(key, format string, args ...any) {
		e := c.ErrorAt(key, format, args...)
		out = append(out, "warning: "+e.Error())
	}
	// Values still the example's.
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	section := ""
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "[") {
			section, _, _ = strings.Cut(line, "#")
			section = strings.TrimSpace(section) + " "
			continue
		}
		i := strings.Index(line, "REPLACE-WITH-")
		if i < 0 || (strings.Contains(line[:i], "#") && !strings.Contains(line[:i], `"`)) {
			continue
		}
		key, _, _ := strings.Cut(line, "=")
		out = append(out, fmt.Sprintf("warning: %s:%d: %s: still the example's placeholder %s: put in your own value",
			c.File(), n, section+strings.TrimSpace(key), placeholderWord(line[i:])))
	}
	if c.InFile("telegram.progress_interval") {
		if c.InFile("chat.progress_interval") {
			warn("telegram.progress_interval", "deprecated, and [chat] progress_interval is set too: that one is in force; remove this one")
		} else {
			warn("telegram.progress_interval", "deprecated: it sets the live progress of every transport; write progress_interval = %q under [chat] instead (it still works)", c.ProgressInterval().String())
		}
	}
	for _, f := range []struct {
		key string
		ids []int64
	}{{"auth.operators", c.Auth.Operators}, {"auth.viewers", c.Auth.Viewers}} {
		if slices.Contains(f.ids, exampleUserID) {
			warn(f.key, "%d is the example's user id: put in your own (send /start to the bot, or ask @userinfobot)", exampleUserID)
		}
	}
	for i, jc := range c.Jobs {
		key := fmt.Sprintf("jobs[%d].command", i)
		if len(jc.Command) == 0 {
			continue
		}
		if jc.Runner != "slurm" {
			if why := programMissing(jc.Command[0], ExpandHome(jc.Dir)); why != "" {
				warn(key, "%s", why)
			}
		}
		if script, ok := shellScript(jc.Command); ok {
			for _, m := range paramRef.FindAllStringSubmatch(script, -1) {
				name := m[2]
				warn(key, "the shell script after -c puts {%s} into shell code: a value such as `1; rm -rf ~` would run as a command. "+
					"Use the environment instead: \"$TRAINBOT_PARAM_%s\" in the script (every parameter is passed so)", name, strings.ToUpper(name))
			}
		}
	}
	return out
}

// placeholderWord is the placeholder at the start of s: "REPLACE-WITH-THE-ROBOT-KEY".
func placeholderWord(s string) string {
	end := strings.IndexFunc(s, func(r rune) bool { return !(r == '-' || r == '_' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') })
	if end < 0 {
		return s
	}
	return s[:end]
}

// programMissing says why prog cannot be run ("" when it can): not on PATH,
// or, for a path, not there or not executable (relative to dir).
func programMissing(prog, dir string) string {
	if strings.Contains(prog, "{") {
		return "" // a parameter names it
	}
	if !strings.Contains(prog, "/") {
		if _, err := exec.LookPath(prog); err != nil {
			return fmt.Sprintf("program %q is not on PATH here (%v)", prog, err)
		}
		return ""
	}
	path := ExpandHome(prog)
	if !filepath.IsAbs(path) && dir != "" {
		path = filepath.Join(dir, path)
	}
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return fmt.Sprintf("program %q: %v", prog, err)
	case fi.IsDir():
		return fmt.Sprintf("program %q is a directory", prog)
	case fi.Mode()&0o111 == 0:
		return fmt.Sprintf("program %q is not executable (chmod +x %s)", prog, path)
	}
	return ""
}

// shellScript is the script of a command that runs a shell with -c.
func shellScript(argv []string) (string, bool) {
	if !slices.Contains(shells, filepath.Base(argv[0])) {
		return "", false
	}
	for i := 1; i < len(argv)-1; i++ {
		a := argv[i]
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "c") {
			return argv[i+1], true
		}
	}
	return "", false
}
