package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// newcomer is a fresh account: a home directory and the PATH of the test
// (python3 for the script), no XDG variables, no config anywhere.
func newcomer(t *testing.T) (home string, environ []string) {
	t.Helper()
	home = t.TempDir()
	return home, []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
}

// in runs a subcommand with environ and stdin.
func in(t *testing.T, environ []string, stdin string, args ...string) (int, string, string) {
	t.Helper()
	e, out, errOut := testEnv(t, strings.NewReader(stdin))
	e.environ = environ
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := run(ctx, args, e)
	return code, out.String(), errOut.String()
}

const argparseScript = `import argparse, time
p = argparse.ArgumentParser()
p.add_argument("--lr", type=float, default=1e-3, help="learning rate")
p.add_argument('--batch-size', type=int, default=64)
p.add_argument("--out", type=str, default="x")
a = p.parse_args()
for s in range(1, 11):
    print(f"step={s} loss={1.0/s:.4f} lr={a.lr} bs={a.batch_size}", flush=True)
    time.sleep(0.01)
`

// The README's newcomer path: init --job ./train.py, check, console, then
// the history commands — none of them given --config — read and write the
// one config at ~/.config/trainbot/config.toml.
func TestInitThenCheckConsoleAndRunsFindTheSameConfig(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is needed to run the script init makes a job of (CI installs it)")
	}
	home, environ := newcomer(t)
	proj := filepath.Join(home, "proj")
	os.MkdirAll(proj, 0o755)
	script := filepath.Join(proj, "train.py")
	os.WriteFile(script, []byte(argparseScript), 0o644)

	code, out, errOut := in(t, environ, "", "init", "--job", script)
	if code != 0 {
		t.Fatalf("init: %d\n%s%s", code, out, errOut)
	}
	path := filepath.Join(home, ".config", "trainbot", "config.toml")
	st, err := os.Stat(path)
	if err != nil {
		t.Fatalf("init wrote no %s: %v\n%s", path, err, out)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", path, st.Mode().Perm())
	}
	for _, want := range []string{"wrote " + path, "job train runs ", "parameters from its argparse: lr, batch_size", "trainbot check ", "trainbot console "} {
		if !strings.Contains(out, want) {
			t.Errorf("init's output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "--config") {
		t.Errorf("init wrote the default config but tells the user to pass --config:\n%s", out)
	}
	raw, _ := os.ReadFile(path)
	for _, want := range []string{`data_dir = "` + filepath.Join(home, ".local", "state", "trainbot") + `"`, `"--batch-size", "{batch_size}"`, "[jobs.params.lr]", "# [telegram]"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("the config lacks %q", want)
		}
	}

	// A second init keeps the user's edits unless told.
	if code, _, errOut := in(t, environ, "", "init", "--job", script); code == 0 || !strings.Contains(errOut, path+" exists") {
		t.Errorf("a second init: %d %q, want a refusal naming the file", code, errOut)
	}

	code, out, errOut = in(t, environ, "", "check")
	if code != 0 || !strings.HasPrefix(out, path+": OK — 1 job(s): train") {
		t.Fatalf("check without --config: %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = in(t, environ, "开始 lr=0.5\n", "console")
	if code != 0 || !strings.Contains(out, "run #1 started: train batch_size=64 lr=0.5") || !strings.Contains(out, "finished") {
		t.Fatalf("console without --config: %d\n%s%s", code, out, errOut)
	}
	log, _ := os.ReadFile(filepath.Join(home, ".local", "state", "trainbot", "runs", "1", "output.log"))
	if !strings.Contains(string(log), "lr=0.5 bs=64") {
		t.Errorf("the script did not get its parameters: %q", log)
	}
	if code, out, errOut = in(t, environ, "", "runs"); code != 0 || !strings.Contains(out, "#1 train finished") {
		t.Errorf("runs without --config: %d\n%s%s", code, out, errOut)
	}
	png := filepath.Join(home, "loss.png")
	if code, out, errOut = in(t, environ, "", "plot", "1", "-o", png); code != 0 {
		t.Errorf("plot 1 without --config: %d\n%s%s", code, out, errOut)
	} else if _, err := os.Stat(png); err != nil {
		t.Errorf("plot wrote no chart: %v", err)
	}

	// trainbot runs shows each run's parameters and finds runs by one
	// (#31: it had no parameter column and no filter).
	if code, out, errOut = in(t, environ, "开始 batch_size=256\n", "console"); code != 0 || !strings.Contains(out, "finished") {
		t.Fatalf("a second run: %d\n%s%s", code, out, errOut)
	}
	code, out, _ = in(t, environ, "", "runs")
	if code != 0 || !strings.Contains(out, " · batch_size=256 lr=0.001\n") || !strings.Contains(out, " · batch_size=64 lr=0.5\n") {
		t.Errorf("runs does not show the parameters:\n%s", out)
	}
	code, out, _ = in(t, environ, "", "runs", "--param", "batch_size=256")
	if code != 0 || !strings.Contains(out, "#2 train") || strings.Contains(out, "#1 train") {
		t.Errorf("runs --param batch_size=256:\n%s", out)
	}
	if code, out, _ = in(t, environ, "", "runs", "--param", "lr=5e-1", "--param", "batch_size=64"); code != 0 || !strings.Contains(out, "#1 train") || strings.Contains(out, "#2 train") {
		t.Errorf("runs --param lr=5e-1 (numbers compare as numbers):\n%s", out)
	}
	if code, out, _ = in(t, environ, "", "runs", "--param", "batch_size=7"); code != 0 || !strings.Contains(out, "no run in ") {
		t.Errorf("runs --param with no match:\n%s", out)
	}
	if code, _, errOut = in(t, environ, "", "runs", "--param", "batch_size"); code != exitUsage || !strings.Contains(errOut, "want NAME=VALUE") {
		t.Errorf("runs --param without a value: %d %q", code, errOut)
	}

	// --force replaces it and keeps the old one.
	if code, _, errOut := in(t, environ, "", "init", "--force"); code != 0 {
		t.Fatalf("init --force: %d %s", code, errOut)
	}
	if old, _ := os.ReadFile(path + ".bak"); string(old) != string(raw) {
		t.Error("init --force did not keep the old config as .bak")
	}
}

// $TRAINBOT_CONFIG comes before the default path, and one that names no
// file is an error that says so (not a silent fall back to another config).
func TestTrainbotConfigVariable(t *testing.T) {
	home, environ := newcomer(t)
	def := filepath.Join(home, ".config", "trainbot", "config.toml")
	os.MkdirAll(filepath.Dir(def), 0o700)
	os.WriteFile(def, []byte("[[jobs]]\nname = \"default\"\ncommand = [\"true\"]\n"), 0o600)
	other := filepath.Join(home, "other.toml")
	os.WriteFile(other, []byte("[[jobs]]\nname = \"other\"\ncommand = [\"true\"]\n"), 0o600)

	if code, out, _ := in(t, environ, "", "check"); code != 0 || !strings.Contains(out, "1 job(s): default") {
		t.Errorf("check finds the default config: %d %s", code, out)
	}
	withVar := append(environ, "TRAINBOT_CONFIG="+other)
	if code, out, _ := in(t, withVar, "", "check"); code != 0 || !strings.Contains(out, "1 job(s): other") {
		t.Errorf("check with TRAINBOT_CONFIG: %d %s", code, out)
	}
	if code, out, _ := in(t, withVar, "", "check", "--config", def); code != 0 || !strings.Contains(out, "1 job(s): default") {
		t.Errorf("--config comes first: %d %s", code, out)
	}
	missing := append(environ, "TRAINBOT_CONFIG="+filepath.Join(home, "nope.toml"))
	if code, _, errOut := in(t, missing, "", "runs"); code == 0 || !strings.Contains(errOut, "TRAINBOT_CONFIG="+filepath.Join(home, "nope.toml")) {
		t.Errorf("a TRAINBOT_CONFIG that names no file: %d %q", code, errOut)
	}
	_, env2 := newcomer(t)
	if code, _, errOut := in(t, env2, "", "console"); code != exitUsage || !strings.Contains(errOut, "no config: give --config FILE, set TRAINBOT_CONFIG, or write") || !strings.Contains(errOut, "trainbot init") {
		t.Errorf("console with no config anywhere: %d %q", code, errOut)
	}
}

// A bot started with a config the lookup would not find suggests commands
// with --config, so they work as printed; one started with the default
// config suggests them bare.
func TestSuggestedCommandsCarryTheConfig(t *testing.T) {
	home, environ := newcomer(t)
	elsewhere := filepath.Join(home, "lab", "bot.toml")
	os.MkdirAll(filepath.Dir(elsewhere), 0o700)
	os.WriteFile(elsewhere, []byte("data_dir = \""+filepath.Join(home, "labdata")+"\"\n"), 0o600)
	code, out, errOut := in(t, environ, "关注 /tmp/x.log\n", "console", "--config", elsewhere)
	if code != 0 || !strings.Contains(out, "trainbot watch --config "+elsewhere+" --log FILE") {
		t.Errorf("a bot with --config %s: %d\n%s%s", elsewhere, code, out, errOut)
	}
	def := filepath.Join(home, ".config", "trainbot", "config.toml")
	os.MkdirAll(filepath.Dir(def), 0o700)
	os.WriteFile(def, []byte("# the default\n"), 0o600)
	code, out, errOut = in(t, environ, "关注 /tmp/x.log\n", "console")
	if code != 0 || !strings.Contains(out, "trainbot watch --log FILE") {
		t.Errorf("a bot with the default config: %d\n%s%s", code, out, errOut)
	}
	// The demo reads no config by itself; with a default config about, its
	// suggestions name the data directory they must read.
	data := filepath.Join(home, "demodata")
	if got := cliFlags(configFlags{explicit: true, data: data, looked: true}, data, environ); got != "--data "+data {
		t.Errorf("demo --data %s: cliFlags %q", data, got)
	}
	if got := cliFlags(configFlags{explicit: true, looked: true}, filepath.Join(home, ".local/state/trainbot"), environ); !strings.HasPrefix(got, "--data ") {
		t.Errorf("demo beside a default config: cliFlags %q, want --data", got)
	}
	if got := cliFlags(configFlags{config: def, from: "--config", looked: true}, "", environ); got != "" {
		t.Errorf("--config naming the default config: cliFlags %q, want none", got)
	}
}

// A value from the environment is reported at its variable, not at the
// line of the file that holds its table.
func TestCheckNamesTheEnvironmentForItsValues(t *testing.T) {
	home, environ := newcomer(t)
	path := filepath.Join(home, "tg.toml")
	os.WriteFile(path, []byte("# a bot\n\n[telegram]\npoll_timeout = \"30s\"\n"), 0o600)
	code, _, errOut := in(t, append(environ, "TRAINBOT_TELEGRAM_TOKEN=not-a-token"), "", "check", "--config", path)
	if code == 0 || !strings.Contains(errOut, "trainbot: TRAINBOT_TELEGRAM_TOKEN (environment): telegram.token: does not look like a bot token") || strings.Contains(errOut, "tg.toml:3") {
		t.Errorf("check: %d %q", code, errOut)
	}
}

// A relative --data is taken from where the command runs: the demo with
// --data data failed every start ("run_dir \"data/runs/1\" is not absolute").
func TestRelativeDataDir(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	_, environ := newcomer(t)
	code, out, errOut := in(t, environ, "开始 steps=20 pace_ms=0\n", "demo", "--data", "data")
	if code != 0 || !strings.Contains(out, "finished") {
		t.Fatalf("demo --data data: %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "runs", "1", "output.log")); err != nil {
		t.Errorf("the run is not under ./data: %v", err)
	}
}
