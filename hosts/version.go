package hosts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Protocol is the version of what the hub and a host's trainbot say to
// each other. A host must speak the hub's protocol: another one is
// refused (ProtocolError). It goes up by one whenever a hub could
// misread a host or a host a hub.
const Protocol = 1

// Version is what `trainbot version --json` prints.
type Version struct {
	// Version is the module version ("v1.2.3", a pseudo-version, or
	// "(devel)" / "unknown" for a build that carries none).
	Version string `json:"version"`
	// Revision is the VCS revision ("unknown" when not recorded).
	Revision string `json:"revision"`
	// Modified is "true" when the tree had changes, "false", or "unknown".
	Modified string `json:"modified"`
	// Go is the Go release it was built with.
	Go string `json:"go"`
	// Protocol is the hub–host protocol it speaks.
	Protocol int `json:"protocol"`
}

func (v Version) String() string {
	s := v.Version
	if v.Revision != "" && v.Revision != "unknown" {
		r := v.Revision
		if len(r) > 12 {
			r = r[:12]
		}
		s += " (" + r
		if v.Modified == "true" {
			s += ", modified"
		}
		s += ")"
	}
	return s + ", protocol " + strconv.Itoa(v.Protocol)
}

// ErrNoTrainbot is the error of RemoteVersion when the remote trainbot is
// not there (the shell's status 127).
var ErrNoTrainbot = errors.New("trainbot not found")

// ProtocolError is a host whose trainbot speaks another protocol than the
// hub's.
type ProtocolError struct {
	Host      string
	Hub, Peer Version
}

func (e *ProtocolError) Error() string {
	how := "install this one there: trainbot hosts install " + e.Host
	if e.Peer.Protocol > e.Hub.Protocol {
		how = "upgrade this trainbot (the hub), or put this one there: trainbot hosts install " + e.Host
	}
	return fmt.Sprintf("host %s runs trainbot %s, this hub trainbot %s: hub and host must speak one protocol; %s",
		e.Host, e.Peer, e.Hub, how)
}

// RemoteVersion runs the remote `trainbot version --json`.
func (c *Client) RemoteVersion(ctx context.Context) (Version, error) {
	var out, errOut bytes.Buffer
	res, err := c.Run(ctx, Cmd{Line: c.Trainbot() + " version --json", Stdout: &out, Stderr: &errOut})
	if err != nil {
		return Version{}, err
	}
	msg := strings.TrimSpace(errOut.String())
	switch {
	case res.Status == 127:
		return Version{}, fmt.Errorf("%s on %s: %w (%s)", c.Target.Trainbot, c.Target.Name, ErrNoTrainbot, msg)
	case res.Status != 0 || res.Signal != "":
		return Version{}, fmt.Errorf("%s version --json on %s: exit status %d %s: %s", c.Target.Trainbot, c.Target.Name, res.Status, res.Signal, msg)
	}
	var v Version
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		return Version{}, fmt.Errorf("%s version --json on %s: %w (an old trainbot without --json?)", c.Target.Trainbot, c.Target.Name, err)
	}
	return v, nil
}

// CheckVersion is the version rule: the host's trainbot must speak the
// hub's protocol.
func CheckVersion(host string, hub, peer Version) error {
	if hub.Protocol != peer.Protocol {
		return &ProtocolError{Host: host, Hub: hub, Peer: peer}
	}
	return nil
}

// Trainbot is the remote trainbot as a word of a shell command line.
func (c *Client) Trainbot() string { return QuotePath(c.Target.Trainbot) }

// Quote quotes s as one word of a POSIX shell command line.
func Quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// QuotePath is Quote for a path that may begin with "~/", which stays the
// remote home directory.
func QuotePath(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		return `"$HOME"/` + Quote(rest)
	}
	return Quote(p)
}

// CompareVersions orders two module versions (semantic versions, Go's
// pseudo-versions included): -1, 0 or 1; ok is false when either is not
// one ("(devel)", "unknown").
func CompareVersions(a, b string) (cmp int, ok bool) {
	pa, oka := parseSemver(a)
	pb, okb := parseSemver(b)
	if !oka || !okb {
		return 0, false
	}
	for i := range 3 {
		if pa.n[i] != pb.n[i] {
			return sign(pa.n[i] - pb.n[i]), true
		}
	}
	// A release is above its pre-releases.
	switch {
	case pa.pre == pb.pre:
		return 0, true
	case pa.pre == "":
		return 1, true
	case pb.pre == "":
		return -1, true
	}
	ia, ib := strings.Split(pa.pre, "."), strings.Split(pb.pre, ".")
	for i := 0; i < len(ia) && i < len(ib); i++ {
		if ia[i] == ib[i] {
			continue
		}
		na, ea := strconv.ParseUint(ia[i], 10, 64)
		nb, eb := strconv.ParseUint(ib[i], 10, 64)
		switch {
		case ea == nil && eb == nil:
			if na < nb {
				return -1, true
			}
			return 1, true
		case ea == nil:
			return -1, true // numeric identifiers are below alphanumeric ones
		case eb == nil:
			return 1, true
		}
		if ia[i] < ib[i] {
			return -1, true
		}
		return 1, true
	}
	return sign(len(ia) - len(ib)), true
}

type semver struct {
	n   [3]int
	pre string
}

// parseSemver reads vMAJOR.MINOR.PATCH[-pre][+build]; the build is
// ignored.
func parseSemver(v string) (semver, bool) {
	var s semver
	rest, ok := strings.CutPrefix(v, "v")
	if !ok {
		return s, false
	}
	rest, _, _ = strings.Cut(rest, "+")
	rest, s.pre, _ = strings.Cut(rest, "-")
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		return s, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return s, false
		}
		s.n[i] = n
	}
	return s, true
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}
