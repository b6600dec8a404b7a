package main

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/trainbot/trainbot/hosts"
)

// Version is set at build time with -ldflags "-X main.Version=v1.2.3";
// when it is empty, trainbot version prints the module version the go
// command recorded.
var Version = ""

// buildInfo is what trainbot version prints.
type buildInfo struct {
	Version  string // -X main.Version, else the module version
	Revision string // the VCS revision the binary was built from
	Modified string // "true" when the work tree had changes, "false"
	Go       string
}

// readBuildInfo takes what the go command recorded in the binary (bi from
// debug.ReadBuildInfo; nil when there is none). A binary built by go run,
// go test, outside a checkout, with -buildvcs=false or from a git worktree
// has no vcs settings: those fields are "unknown".
func readBuildInfo(version string, bi *debug.BuildInfo) buildInfo {
	b := buildInfo{Version: version, Revision: "unknown", Modified: "unknown", Go: "unknown"}
	if bi != nil {
		b.Go = bi.GoVersion
		if b.Version == "" {
			b.Version = bi.Main.Version // "(devel)" for a build from a checkout before Go 1.24
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.modified":
				b.Modified = s.Value
			}
		}
	}
	if b.Version == "" {
		b.Version = "unknown"
	}
	return b
}

func (b buildInfo) String() string {
	return fmt.Sprintf("trainbot %s\nrevision %s\nmodified %s\ngo %s\nprotocol %d\n", b.Version, b.Revision, b.Modified, b.Go, hosts.Protocol)
}

// hostsVersion is b as `trainbot version --json` prints it, with the
// hub–host protocol this binary speaks.
func (b buildInfo) hostsVersion() hosts.Version {
	return hosts.Version{Version: b.Version, Revision: b.Revision, Modified: b.Modified, Go: b.Go, Protocol: hosts.Protocol}
}

// thisVersion is this binary's version.
func thisVersion() hosts.Version {
	bi, _ := debug.ReadBuildInfo()
	return readBuildInfo(Version, bi).hostsVersion()
}

func cmdVersion(ctx context.Context, args []string, e env) int {
	fs := newFlags("version", "[--json]", e)
	asJSON := fs.Bool("json", false, "print JSON: version, revision, modified, go and protocol (the hub–host protocol, docs/hosts.md)")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return usageError(fs, e, "unexpected argument %q", pos[0])
	}
	bi, _ := debug.ReadBuildInfo()
	b := readBuildInfo(Version, bi)
	if *asJSON {
		return printJSON(e, b.hostsVersion())
	}
	fmt.Fprint(e.stdout, b)
	return exitOK
}
