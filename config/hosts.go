package config

import (
	"fmt"
	"net"
	"os"
	"os/user"
	"regexp"
	"strconv"
	"strings"
)

// HostConfig is one [[hosts]] entry: a GPU server this trainbot reaches
// over SSH (docs/hosts.md). Validate fills in the
// defaults, so that after it every field but IdentityFile, Jump and
// DataDir is set.
type HostConfig struct {
	// Name is how the host is called in commands and chats: lowercase
	// letters, digits and '-', unique.
	Name string `toml:"name"`
	// Address is "host:port"; the port defaults to 22.
	Address string `toml:"address"`
	// User is the account to log in as (default: the current user).
	User string `toml:"user"`
	// IdentityFile is a private key file ("~/" is the home directory);
	// unset, the ssh-agent at $SSH_AUTH_SOCK signs.
	IdentityFile string `toml:"identity_file"`
	// KnownHosts is the OpenSSH known_hosts file the host's key must be in
	// (default ~/.ssh/known_hosts). Checking is strict: an unknown or
	// changed key is refused.
	KnownHosts string `toml:"known_hosts"`
	// Jump is the name of another [[hosts]] entry to go through (a
	// bastion, as ssh's -J).
	Jump string `toml:"jump"`
	// Trainbot is the remote trainbot binary: a path, or a name looked up
	// in the remote PATH (default "trainbot").
	Trainbot string `toml:"trainbot"`
	// DataDir is the remote trainbot's data directory ("" is the remote
	// default, ~/.local/state/trainbot).
	DataDir string `toml:"data_dir"`
}

// DefaultSSHPort is the port of a [[hosts]] address that gives none.
const DefaultSSHPort = "22"

// DefaultRemoteTrainbot is the default [[hosts]] trainbot.
const DefaultRemoteTrainbot = "trainbot"

var hostName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// currentUser is the default [[hosts]] user (a variable for tests).
var currentUser = func() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return os.Getenv("USER")
}

// Host returns the [[hosts]] entry called name, or nil.
func (c *Config) Host(name string) *HostConfig {
	for i := range c.Hosts {
		if c.Hosts[i].Name == name {
			return &c.Hosts[i]
		}
	}
	return nil
}

// hostNames is " (the hosts are a, b)" for an error, or " (there is no
// [[hosts]] entry)".
func (c *Config) hostNames() string {
	if len(c.Hosts) == 0 {
		return " (there is no [[hosts]] entry)"
	}
	names := make([]string, len(c.Hosts))
	for i, h := range c.Hosts {
		names[i] = h.Name
	}
	return " (the hosts are " + strings.Join(names, ", ") + ")"
}

// validateHosts checks [[hosts]] and fills in its defaults.
func (c *Config) validateHosts() Errors {
	var errs Errors
	seen := map[string]int{}
	for i := range c.Hosts {
		h := &c.Hosts[i]
		add := func(sub, format string, args ...any) {
			errs = append(errs, c.EntryErrorAt("hosts", i, h.Name, sub, sub[1:]+": "+format, args...))
		}
		switch prev, dup := seen[h.Name]; {
		case h.Name == "":
			add(".name", "a host needs a name, e.g. name = \"gpu2\"")
		case !hostName.MatchString(h.Name):
			add(".name", "want lowercase letters, digits and '-' (at most 63), got %q", h.Name)
		case dup:
			add(".name", "host %q is already defined by hosts[%d]", h.Name, prev)
		default:
			seen[h.Name] = i
		}
		if addr, err := hostAddress(h.Address); err != nil {
			add(".address", "%v", err)
		} else {
			h.Address = addr
		}
		if h.User == "" {
			h.User = currentUser()
		}
		if h.User == "" || strings.ContainsAny(h.User, " \t\n@:/") {
			add(".user", "want an account name, got %q", h.User)
		}
		if h.IdentityFile != "" {
			h.IdentityFile = ExpandHome(h.IdentityFile)
			if st, err := os.Stat(h.IdentityFile); err != nil || st.IsDir() {
				add(".identity_file", "%q is not a readable key file (leave identity_file unset to use the ssh-agent)", h.IdentityFile)
			}
		}
		if h.KnownHosts == "" {
			h.KnownHosts = "~/.ssh/known_hosts"
		}
		h.KnownHosts = ExpandHome(h.KnownHosts)
		if st, err := os.Stat(h.KnownHosts); err == nil && st.IsDir() {
			add(".known_hosts", "%q is a directory: want an OpenSSH known_hosts file", h.KnownHosts)
		}
		if h.Trainbot == "" {
			h.Trainbot = DefaultRemoteTrainbot
		}
		if strings.ContainsAny(h.Trainbot, "\n\x00") {
			add(".trainbot", "want a path of the remote trainbot, got %q", h.Trainbot)
		}
		if strings.ContainsAny(h.DataDir, "\n\x00") {
			add(".data_dir", "want a path of the remote data directory, got %q", h.DataDir)
		}
	}
	// Jumps name other entries, and going through them ends.
	for i, h := range c.Hosts {
		if h.Jump == "" {
			continue
		}
		add := func(format string, args ...any) {
			errs = append(errs, c.EntryErrorAt("hosts", i, h.Name, ".jump", "jump: "+format, args...))
		}
		if c.Host(h.Jump) == nil {
			add("%q is not the name of a [[hosts]] entry", h.Jump)
			continue
		}
		path := []string{h.Name}
		for j := c.Host(h.Jump); j != nil; j = c.Host(j.Jump) {
			path = append(path, j.Name)
			if j.Name == h.Name {
				add("jumps go round in a circle: %s", strings.Join(path, " → "))
				break
			}
			if len(path) > len(c.Hosts) {
				break // a circle that does not pass through h: reported at its own entries
			}
		}
	}
	return errs
}

// hostAddress checks a [[hosts]] address and adds the default port.
func hostAddress(a string) (string, error) {
	a = strings.TrimSpace(a)
	if a == "" {
		return "", fmt.Errorf("a host needs an address, e.g. address = \"gpu2.lab:22\"")
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		if strings.Contains(err.Error(), "missing port") {
			host, port = strings.Trim(a, "[]"), DefaultSSHPort
		} else {
			return "", fmt.Errorf("want \"host\" or \"host:port\", got %q", a)
		}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("want a port from 1 to 65535 in %q", a)
	}
	if host == "" || strings.ContainsAny(host, " \t/@") {
		return "", fmt.Errorf("want \"host\" or \"host:port\", got %q", a)
	}
	return net.JoinHostPort(host, port), nil
}
