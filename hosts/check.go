package hosts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// Report is what Check found of one host; each check's error is nil when
// it passed, and a check that could not be made for an earlier failure is
// Skipped.
type Report struct {
	Host string
	// Reach: the dial (DialTime) and its error, which is a *HostKeyError
	// when the host key was refused.
	DialTime time.Duration
	DialErr  error
	// HostKey is the accepted key's type and fingerprint.
	HostKeyType, HostKeyFingerprint string
	// Trainbot is the remote trainbot's version; TrainbotErr wraps
	// ErrNoTrainbot when it is missing, or is a *ProtocolError.
	Trainbot    Version
	TrainbotErr error
	// GPU is what the remote `trainbot gpu --json` said.
	GPU    GPUSummary
	GPUErr error
	// DataDir is the remote data directory (or its nearest existing
	// parent) whose disk was measured; Free its free bytes.
	DataDir string
	Free    int64
	DiskErr error
}

// GPUSummary is the part of `trainbot gpu --json` a check shows.
type GPUSummary struct {
	Available bool   `json:"available"`
	Reason    string `json:"reason"`
	Driver    string `json:"driver_version"`
	Devices   []struct {
		Index            int    `json:"index"`
		Name             string `json:"name"`
		UUID             string `json:"uuid"`
		MemoryTotalBytes uint64 `json:"memory_total_bytes"`
	} `json:"devices"`
	Error string `json:"error"`
}

// OK reports whether every check passed (NVML being unavailable is a
// fact of the host, not a failure: a host may have no GPU).
func (r Report) OK() bool {
	return r.DialErr == nil && r.TrainbotErr == nil && r.GPUErr == nil && r.DiskErr == nil
}

// ErrSkipped is the error of a check that an earlier failure made
// impossible.
var ErrSkipped = errors.New("skipped")

// Check dials t and checks what a hub needs of it: the host key, the
// remote trainbot's version and protocol (against hub), its NVML and the
// free disk of its data directory.
func Check(ctx context.Context, t *Target, o Options, hub Version) Report {
	r := Report{Host: t.Name, TrainbotErr: ErrSkipped, GPUErr: ErrSkipped, DiskErr: ErrSkipped}
	c, err := Dial(ctx, t, o)
	if err != nil {
		r.DialErr = err
		return r
	}
	defer c.Close()
	r.DialTime, r.HostKeyType, r.HostKeyFingerprint = c.DialTime, c.HostKey.Type(), ssh.FingerprintSHA256(c.HostKey)
	r.DataDir, r.Free, r.DiskErr = c.FreeDisk(ctx)
	r.Trainbot, r.TrainbotErr = c.RemoteVersion(ctx)
	if r.TrainbotErr != nil {
		return r
	}
	if r.TrainbotErr = CheckVersion(t.Name, hub, r.Trainbot); r.TrainbotErr != nil {
		return r
	}
	r.GPU, r.GPUErr = c.GPU(ctx)
	return r
}

// dataDirWord is the remote data directory as a word of a command line.
func (c *Client) dataDirWord() string {
	if c.Target.DataDir != "" {
		return QuotePath(c.Target.DataDir)
	}
	return `"${XDG_STATE_HOME:-$HOME/.local/state}/trainbot"`
}

// GPU runs the remote `trainbot gpu --json`: without NVML there it
// answers with available false and the reason.
func (c *Client) GPU(ctx context.Context) (GPUSummary, error) {
	var g GPUSummary
	out, err := c.GPUJSON(ctx)
	if err != nil {
		return g, err
	}
	if err := json.Unmarshal(out, &g); err != nil {
		return g, fmt.Errorf("trainbot gpu --json on %s: %w", c.Target.Name, err)
	}
	return g, nil
}

// GPUJSON runs the remote `trainbot gpu --json` and returns what it
// printed, which the caller decodes (gpu.JSON); a command that printed no
// JSON object is an error with its exit status and its first line of
// stderr. A non-zero status with an object is not an error: the remote
// trainbot exits 1 when part of the sample could not be read, and says
// what in the object.
func (c *Client) GPUJSON(ctx context.Context) ([]byte, error) {
	line := c.Trainbot() + " gpu --json"
	if c.Target.DataDir != "" {
		line += " --data " + c.dataDirWord()
	}
	var out, errOut bytes.Buffer
	res, err := c.Run(ctx, Cmd{Line: line, Stdout: &out, Stderr: &errOut})
	if err != nil {
		return nil, err
	}
	if b := bytes.TrimSpace(out.Bytes()); len(b) == 0 || b[0] != '{' || !json.Valid(b) {
		return nil, fmt.Errorf("trainbot gpu --json on %s: exit status %d: %s", c.Target.Name, res.Status, firstNonEmptyLine(errOut.String(), out.String()))
	}
	return out.Bytes(), nil
}

// firstNonEmptyLine is the first line of the first of s that has one.
func firstNonEmptyLine(s ...string) string {
	for _, x := range s {
		if l := firstLine(x); l != "" {
			return l
		}
	}
	return "no output"
}

// FreeDisk measures the free space of the remote data directory (or the
// nearest of its parents that exists) with df -Pk.
func (c *Client) FreeDisk(ctx context.Context) (dir string, free int64, err error) {
	line := `d=` + c.dataDirWord() + `; while [ ! -d "$d" ]; do d=$(dirname -- "$d"); done; echo "$d"; df -Pk -- "$d"`
	var out, errOut bytes.Buffer
	// sh: the login shell may be another (fish, tcsh).
	res, err := c.Run(ctx, Cmd{Line: "sh -c " + Quote(line), Stdout: &out, Stderr: &errOut})
	if err != nil {
		return "", 0, err
	}
	if res.Status != 0 {
		return "", 0, fmt.Errorf("df on %s: exit status %d: %s", c.Target.Name, res.Status, firstLine(errOut.String()))
	}
	dir, free, err = parseDF(out.String())
	if err != nil {
		return "", 0, fmt.Errorf("df on %s: %w", c.Target.Name, err)
	}
	return dir, free, nil
}

// parseDF reads the directory line and df -Pk's output: a header, then
// "fs 1024-blocks used available capacity mount".
func parseDF(s string) (dir string, free int64, err error) {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) < 3 {
		return "", 0, fmt.Errorf("unexpected output %q", s)
	}
	f := strings.Fields(lines[len(lines)-1])
	if len(f) < 6 {
		return "", 0, fmt.Errorf("unexpected output %q", s)
	}
	kb, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("unexpected available %q", f[3])
	}
	return lines[0], kb * 1024, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// Need is why Install replaces the remote trainbot, or why not.
type Need int

// Values of Need.
const (
	NeedMissing  Need = iota + 1 // no trainbot there: install
	NeedProtocol                 // another protocol: install
	NeedOlder                    // an older version: install
	NeedForced                   // --force
	NeedSame                     // the same version: nothing to do
	NeedNewer                    // a newer version: not replaced
	NeedUnknown                  // the versions cannot be ordered: not replaced
)

// Install reports whether n replaces the remote trainbot.
func (n Need) Install() bool { return n <= NeedForced }

// Decide says whether the local trainbot should replace the remote one
// (remote, or remoteErr from RemoteVersion).
func Decide(local, remote Version, remoteErr error, force bool) Need {
	switch {
	case force:
		return NeedForced
	case errors.Is(remoteErr, ErrNoTrainbot):
		return NeedMissing
	case remoteErr != nil:
		// There, but it cannot say its version (an old one without
		// --json, a broken file): replaced like a missing one.
		return NeedMissing
	case remote.Protocol != local.Protocol:
		return NeedProtocol
	case remote.Version == local.Version && remote.Revision == local.Revision && remote.Modified == local.Modified:
		return NeedSame
	}
	switch cmp, ok := CompareVersions(remote.Version, local.Version); {
	case !ok:
		return NeedUnknown
	case cmp < 0:
		return NeedOlder
	case cmp > 0:
		return NeedNewer
	}
	return NeedSame
}

// Install copies the local file bin to the remote trainbot's path: over
// a session's stdin into a temporary file next to it, which is checked
// for its size, made executable (0755) and renamed over the path, so that
// a trainbot running there is never seen half-written. A bare name (the
// default "trainbot") is the one the remote PATH finds; with none there,
// it is refused: set [[hosts]] trainbot to a path. It returns the path
// installed.
func (c *Client) Install(ctx context.Context, bin string) (string, error) {
	f, err := os.Open(bin)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	script := `set -e
p=` + c.Trainbot() + `
case "$p" in
*/*) ;;
*) p=$(command -v -- "$p") || { echo "$p is not on the remote PATH: set trainbot to a path in its [[hosts]] entry" >&2; exit 3; } ;;
esac
mkdir -p -- "$(dirname -- "$p")"
t=$(mktemp "$p.XXXXXX")
trap 'rm -f -- "$t"' EXIT
cat > "$t"
n=$(wc -c < "$t")
[ "$n" -eq ` + strconv.FormatInt(st.Size(), 10) + ` ] || { echo "got $n bytes of ` + strconv.FormatInt(st.Size(), 10) + `" >&2; exit 4; }
chmod 0755 "$t"
mv -f -- "$t" "$p"
trap - EXIT
echo "$p"`
	var out, errOut bytes.Buffer
	res, err := c.Run(ctx, Cmd{Line: "sh -c " + Quote(script), Stdin: io.LimitReader(f, st.Size()), Stdout: &out, Stderr: &errOut})
	if err != nil {
		return "", err
	}
	if res.Status != 0 {
		return "", fmt.Errorf("install on %s: exit status %d: %s", c.Target.Name, res.Status, firstLine(errOut.String()))
	}
	return strings.TrimSpace(out.String()), nil
}
