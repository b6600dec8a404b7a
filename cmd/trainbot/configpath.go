package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/trainbot/trainbot/internal/termsafe"
)

// ConfigEnv names the config file when no --config flag does.
const ConfigEnv = "TRAINBOT_CONFIG"

// getenv is the value of name in environ ("" when unset).
func getenv(environ []string, name string) string {
	v := ""
	for _, kv := range environ {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val // the last one wins, as in a shell
		}
	}
	return v
}

// defaultConfigPath is where trainbot looks for its config when neither
// --config nor $TRAINBOT_CONFIG names one: $XDG_CONFIG_HOME/trainbot/
// config.toml, else ~/.config/trainbot/config.toml ("" without a home).
func defaultConfigPath(environ []string) string {
	if x := getenv(environ, "XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "trainbot", "config.toml")
	}
	home := getenv(environ, "HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	if home == "" {
		return ""
	}
	return filepath.Join(home, ".config", "trainbot", "config.toml")
}

// displayPath is path with the home directory as ~ (for help texts).
func displayPath(path string) string {
	if home, err := os.UserHomeDir(); err == nil && home != "" && strings.HasPrefix(path, home+"/") {
		return "~" + path[len(home):]
	}
	return path
}

// find settles which config file the command reads: --config, else
// $TRAINBOT_CONFIG (which must exist), else the default path when a file
// is there; none is not an error here (commands that need one say so).
func (c *configFlags) find(e env) error {
	if c.looked {
		return nil
	}
	c.looked = true
	switch {
	case c.config != "":
		c.from = "--config"
	case c.explicit:
	case getenv(e.environ, ConfigEnv) != "":
		c.config, c.from = getenv(e.environ, ConfigEnv), ConfigEnv
		if _, err := os.Stat(c.config); err != nil {
			return fmt.Errorf("%s=%s: %v", ConfigEnv, c.config, err)
		}
	default:
		if p := defaultConfigPath(e.environ); p != "" {
			if _, err := os.Stat(p); err == nil {
				c.config, c.from = p, "default"
			}
		}
	}
	return nil
}

// noConfig is the usage error of a command that needs a config and found
// none, with the places it looked.
func noConfig(environ []string) string {
	return fmt.Sprintf("no config: give --config FILE, set %s, or write %s with 'trainbot init'", ConfigEnv, displayPath(defaultConfigPath(environ)))
}

// cliFlags are the flags a command printed for the user to run (trainbot
// plot 12, trainbot link 12) needs to read the same config and data
// directory as this bot: none when the lookup finds the bot's own config,
// "--config FILE" when it would not, and "--data DIR" when the data
// directory came from the flag or no config names it but the lookup
// would find one.
func cliFlags(cf configFlags, dataDir string, environ []string) string {
	probe := configFlags{}
	_ = probe.find(env{environ: environ})
	var out []string
	switch {
	case cf.config != "" && !samePath(cf.config, probe.config):
		out = append(out, "--config", cf.config)
	case cf.config == "" && probe.config != "":
		out = append(out, "--data", dataDir)
	}
	if cf.data != "" && (len(out) == 0 || out[0] != "--data") {
		out = append(out, "--data", dataDir)
	}
	if len(out) == 0 {
		return ""
	}
	return termsafe.Argv(out)
}

// samePath reports whether a and b name the same file.
func samePath(a, b string) bool {
	if a == "" || b == "" {
		return a == b
	}
	if x, err := filepath.Abs(a); err == nil {
		a = x
	}
	if x, err := filepath.Abs(b); err == nil {
		b = x
	}
	if a == b {
		return true
	}
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}
