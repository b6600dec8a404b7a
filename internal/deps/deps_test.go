package deps

import (
	"bytes"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/trainbot/trainbot/"

// database is what only store and what wires it (cmd, tests) may link.
var database = []string{mod + "store", "modernc.org/sqlite"}

// rules say which import paths a package must not reach, directly or
// through others; a path ending in "/..." forbids the tree under it.
var rules = []struct {
	pkg    string
	forbid []string
	why    string
}{
	{"history", nil, "a leaf: the standard library only (checked below)"},
	{"gpu", append([]string{mod + "trainer", mod + "trainer/shim", mod + "i18n", "testing"}, database...),
		"samples go out through gpu.Recorder, run peaks are told as history.Peak*, alerts are facts that bot/render words"},
	{"plots", append([]string{mod + "trainer", mod + "trainer/shim", "testing"}, database...), "draws what it is given"},
	{"bot/deliver", append([]string{mod + "trainer", mod + "trainer/shim", "testing"}, database...),
		"the outbox is read and written through deliver.Store"},
	// These four know runs (trainer's types and the Supervisor's
	// interface); trainer talks to runs' supervisors through
	// trainer/shimctl, not the supervisor process itself.
	{"bot/render", append([]string{mod + "trainer/shim", "testing"}, database...), "charts and texts read the history through ChartData, FitData"},
	{"bot/notify", append([]string{mod + "trainer/shim", "testing"}, database...), "reads subscriptions and reports through its interfaces"},
	{"bot/command", append([]string{mod + "trainer/shim", "testing"}, database...), "reads the history through command.History"},
	{"web", append([]string{mod + "trainer/shim", "testing"}, database...), "reads the history through web.History"},
	{"trainer", append([]string{mod + "trainer/shim", "testing"}, database...),
		"starts and talks to runs' supervisors through trainer/shimctl; records through trainer.Recorder"},
	// Rooms that cmd/trainbot hands what they need: neither reads the
	// config (cmd turns it into their options) nor knows runs.
	{"internal/private", append([]string{mod + "config", mod + "trainer/...", "testing"}, database...),
		"the umask and the data directory's modes: it is given paths, a group and the secrets' keys"},
	{"internal/reload", append([]string{mod + "config", mod + "trainer/...", "testing"}, database...),
		"SIGHUP, serve.pid and the outcome's notice; what a reload changes is the caller's Apply"},
	{"bot/transport", append([]string{mod + "trainer", mod + "trainer/shim", mod + "bot/telegram", mod + "bot/wecom", mod + "bot/feishu", mod + "bot/dingtalk", "testing"}, database...),
		"the contract a transport meets: config, chat and i18n only; the transports import it, not the other way"},
	{"bot/messengers", append([]string{mod + "trainer", mod + "trainer/shim", "testing"}, database...), "the transports' list: they keep their state through transport.KV"},
	{"cmd/trainbot", []string{"testing"}, "the release binary: tests' helpers stay out of it"},
	{"trainer/gpuclaim", append([]string{mod + "trainer/shim", mod + "bot/...", mod + "i18n", "testing"}, database...),
		"chooses and locks GPUs for the trainer: gpu's facts, internal/gpulock's locks, nothing of the chats"},
	{"bot/gpufree", append([]string{mod + "trainer", mod + "trainer/...", mod + "gpu", "testing"}, database...),
		"asks whether GPUs are free through gpufree.Met, keeps its watches through gpufree.KV"},
	{"hosts", append([]string{mod + "config", mod + "trainer/...", mod + "gpu", "testing"}, database...),
		"SSH to the GPU servers: given Targets (cmd turns [[hosts]] into them), it returns facts; remote runs will go through the remote trainbot, not the local shim"},
	{"gpu/remote", append([]string{mod + "config", mod + "trainer/...", mod + "bot/render", mod + "bot/command", mod + "bot/notify", "testing"}, database...),
		"samples the hosts' GPUs over hosts' connections and returns facts (gpu.HostSample, gpu.Alert) that bot/render words"},
	{"internal/gpulock", append([]string{mod + "trainer/...", mod + "gpu", mod + "bot/...", mod + "config", mod + "i18n", "testing"}, database...),
		"a leaf that the shim, trainer and gpu share: the lock files and their holders, nothing of runs, GPUs' telemetry or chat"},
}

// graph is what `go list -deps` says of one package: every package it
// reaches and the direct imports of each.
type graph struct {
	root    string
	imports map[string][]string
	std     map[string]bool
}

func list(t *testing.T, pkg string) graph {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH: cannot list the dependencies")
	}
	cmd := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}} {{join .Imports \" \"}}", "../../"+pkg)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr.String())
	}
	g := graph{root: mod + pkg, imports: map[string][]string{}, std: map[string]bool{}}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		g.imports[f[0]] = f[2:]
		g.std[f[0]] = f[1] == "true"
	}
	if _, ok := g.imports[g.root]; !ok {
		t.Fatalf("go list -deps %s did not list %s", pkg, g.root)
	}
	return g
}

// paths returns every package reached, sorted.
func (g graph) paths() []string {
	return slices.Sorted(maps.Keys(g.imports))
}

// chain returns the imports from the root to target, breadth first (a
// shortest chain), or nil when target is not reached.
func (g graph) chain(target string) []string {
	prev := map[string]string{g.root: ""}
	queue := []string{g.root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == target {
			var out []string
			for ; p != ""; p = prev[p] {
				out = append([]string{p}, out...)
			}
			return out
		}
		for _, q := range g.imports[p] {
			if _, seen := prev[q]; !seen {
				prev[q] = p
				queue = append(queue, q)
			}
		}
	}
	return nil
}

func forbidden(path, rule string) bool {
	if tree, ok := strings.CutSuffix(rule, "/..."); ok {
		return path == tree || strings.HasPrefix(path, tree+"/")
	}
	return path == rule
}

func TestDependenciesPointDown(t *testing.T) {
	for _, r := range rules {
		t.Run(r.pkg, func(t *testing.T) {
			g := list(t, r.pkg)
			for _, rule := range r.forbid {
				for _, p := range g.paths() {
					if forbidden(p, rule) {
						t.Errorf("%s must not depend on %s (%s); it does: %s", r.pkg, p, r.why, strings.Join(g.chain(p), " -> "))
					}
				}
			}
		})
	}
}

func TestHistoryIsALeaf(t *testing.T) {
	g := list(t, "history")
	for _, p := range g.paths() {
		if p != g.root && !g.std[p] {
			t.Errorf("history must import only the standard library; it reaches %s: %s", p, strings.Join(g.chain(p), " -> "))
		}
	}
}
