package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/telegram/telegramtest"
	"github.com/trainbot/trainbot/store"
	_ "modernc.org/sqlite"
)

// The acceptance of "secrets stay with trainbot, history stays private",
// through the real binary's code paths and real child processes: serve
// with Telegram (the token in the environment and in the file) and a push
// channel whose secret comes from the environment; an operator starts a
// job that prints its environment and a stranger tries to stop it.
func TestSharedServerPrivacy(t *testing.T) {
	fake := telegramtest.NewServer(testToken)
	defer fake.Close()
	hook := newHookServer(t)
	const feishuSecret = "feishu-signing-secret-0123456789"
	t.Setenv("TRAINBOT_TELEGRAM_TOKEN", testToken)
	t.Setenv("FEISHU_SECRET", feishuSecret)
	t.Setenv("TRAINBOT_AUTH_VIEWERS", "4242") // any TRAINBOT_ variable stays with trainbot
	t.Setenv("KEEP_ME", "kept")
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfg := filepath.Join(dir, "trainbot.toml")
	writeFile(t, cfg, 0o600, fmt.Sprintf(`data_dir = %q
[telegram]
token = %q
api_endpoint = %q
poll_timeout = "1s"
[auth]
operators = [111]
[[push]]
kind = "webhook"
url = %q
secret_env = "FEISHU_SECRET"
[[jobs]]
name = "env"
command = ["env"]
env = { DECLARED = "by-the-job" }
`, data, testToken, fake.URL, hook.srv.URL))

	var stdout, stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	e := env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, environ: os.Environ(), exe: os.Args[0]}
	go func() { done <- run(ctx, []string{"serve", "--config", cfg}, e) }()
	await := func(chat int64, want string) { t.Helper(); awaitMessage(t, fake, chat, 0, want, &stderr) }
	fake.UserSays(111, "开始")
	await(111, "run #1 started")
	await(111, "finished")
	fake.UserSays(999, "停止 1")
	await(999, "Your user id is 999")
	cancel()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop")
	}

	// 1. The job printed its environment: none of trainbot's secrets.
	out, err := os.ReadFile(filepath.Join(data, "runs", "1", "output.log"))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.SplitN(testToken, ":", 2)[1]
	for name, secret := range map[string]string{"the Telegram token": token, "FEISHU_SECRET": feishuSecret, "TRAINBOT_AUTH_VIEWERS": "TRAINBOT_AUTH_VIEWERS"} {
		if strings.Contains(string(out), secret) {
			t.Errorf("the job printed %s:\n%s", name, out)
		}
	}
	for _, want := range []string{"KEEP_ME=kept", "DECLARED=by-the-job", "TRAINBOT_RUN_ID=1", "TRAINBOT_METRICS_FILE="} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the job's environment lacks %s:\n%s", want, out)
		}
	}

	// 2. A fresh data directory and every file in it are private.
	n := checkPrivate(t, data, 0o700, 0o600)
	t.Logf("%d paths in the data directory are private", n)

	// 3. trainbot audit --json lists the refused stranger, with the run
	// they named.
	code, jsonOut, errOut := trainbot(t, "", "audit", "--data", data, "--json", "--user", "999")
	if code != exitOK {
		t.Fatalf("audit: exit %d: %s", code, errOut)
	}
	var entries []auditJSON
	if err := json.Unmarshal([]byte(jsonOut), &entries); err != nil {
		t.Fatalf("audit --json: %v\n%s", err, jsonOut)
	}
	if len(entries) != 1 {
		t.Fatalf("audit --user 999: %d entries, want 1:\n%s", len(entries), jsonOut)
	}
	if a := entries[0]; a.Allowed || a.UserID != 999 || a.Messenger != "telegram" || a.Command != "stop" || a.Reason != "not an allowed user" || a.RunID == nil || *a.RunID != 1 || a.Time.IsZero() {
		t.Errorf("the stranger's entry: %+v", a)
	}
	code, text, _ := trainbot(t, "", "audit", "--data", data, "--limit", "1")
	if code != exitOK || !strings.Contains(text, "telegram chat 999") || !strings.Contains(text, "refused: not an allowed user · run #1") || strings.Count(text, "\n") != 1 {
		t.Errorf("audit --limit 1: exit %d:\n%s", code, text)
	}
	code, text, _ = trainbot(t, "", "audit", "--data", data, "--json", "--user", "111")
	if code != exitOK || !strings.Contains(text, `"command": "train"`) || !strings.Contains(text, `"run_id": 1`) || !strings.Contains(text, `"allowed": true`) {
		t.Errorf("audit of the operator: exit %d:\n%s", code, text)
	}

	// 4. A restart that migrates the database (one of the schema before
	// the audit had runs, its files as an earlier version left them)
	// leaves everything private again.
	downgrade(t, data)
	loosen := []string{filepath.Join(data, "trainbot.db"), filepath.Join(data, "runs", "1", "output.log"), filepath.Join(data, "runs", "1", "state.json")}
	for _, p := range loosen {
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(data, "runs"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "console.toml"), 0o600, fmt.Sprintf("data_dir = %q\n[[jobs]]\nname = \"env\"\ncommand = [\"env\"]\n", data))
	code, _, errOut = trainbot(t, "开始\n历史\n", "console", "--config", filepath.Join(dir, "console.toml"))
	if code != exitOK {
		t.Fatalf("console after the downgrade: exit %d: %s", code, errOut)
	}
	if v := schemaVersion(t, data); v < 6 {
		t.Errorf("schema %d after the restart, want it migrated", v)
	}
	n = checkPrivate(t, data, 0o700, 0o600)
	t.Logf("after the restart that migrated the database: %d paths private", n)
}

// checkPrivate stats every path under dir and returns how many it checked.
func checkPrivate(t *testing.T, dir string, dirMode, fileMode os.FileMode) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Stat(path)
		if err != nil {
			return err
		}
		want := fileMode
		if fi.IsDir() {
			want = dirMode
		}
		if got := fi.Mode() & (os.ModePerm | os.ModeSetgid); got != want {
			t.Errorf("%s is %v, want %v", path, got, want)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Errorf("only %d paths in %s: the run's files are missing", n, dir)
	}
	return n
}

// downgrade makes the data directory's database one of schema 5, before
// the audit named runs.
func downgrade(t *testing.T, data string) {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(data, store.DBName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`ALTER TABLE runs DROP COLUMN gpus; ALTER TABLE runs DROP COLUMN end_facts; DROP INDEX audit_refused; DROP INDEX audit_user; ALTER TABLE audit DROP COLUMN run_id; ALTER TABLE runs DROP COLUMN slurm_job_id; ALTER TABLE runs DROP COLUMN node; ALTER TABLE metrics DROP COLUMN src; DROP TABLE event_files; ALTER TABLE runs DROP COLUMN note; DROP TABLE queue; ALTER TABLE runs DROP COLUMN peak_host_how; ALTER TABLE runs DROP COLUMN host; ALTER TABLE runs DROP COLUMN remote_dir; ALTER TABLE runs DROP COLUMN boot_id; ALTER TABLE runs DROP COLUMN resumed_from; DROP TABLE run_changes; ALTER TABLE runs DROP COLUMN param_ranges; PRAGMA user_version = 5`); err != nil {
		t.Fatal(err)
	}
}

func schemaVersion(t *testing.T, data string) int {
	t.Helper()
	st, err := store.Open(data, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v, err := st.SchemaVersion(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func writeFile(t *testing.T, path string, mode os.FileMode, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// check warns, once each, about a config that holds a secret and others
// may read, and about a data directory others may read; with the modes
// fixed it says nothing.
func TestCheckWarnsAboutReadableSecretsAndData(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(data, 0o755)
	cfg := filepath.Join(dir, "trainbot.toml")
	writeFile(t, cfg, 0o644, fmt.Sprintf("data_dir = %q\n[telegram]\ntoken = %q\n", data, testToken))
	code, out, errOut := trainbot(t, "", "check", "--config", cfg)
	if code != exitOK {
		t.Fatalf("check: exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"warning: config " + cfg + " holds a secret (telegram.token) and is readable by group and others (mode 0644): chmod 600 " + cfg,
		"warning: data directory " + data + " is readable by group and others (mode 0755): chmod 700 " + data,
	} {
		if strings.Count(out, want) != 1 {
			t.Errorf("check should say once %q:\n%s", want, out)
		}
	}
	if strings.Contains(out+errOut, strings.SplitN(testToken, ":", 2)[1]) {
		t.Error("check printed the token")
	}
	os.Chmod(cfg, 0o600)
	os.Chmod(data, 0o700)
	if _, out, _ := trainbot(t, "", "check", "--config", cfg); strings.Contains(out, "warning") {
		t.Errorf("check warns with private modes:\n%s", out)
	}
	// The token from the environment: the file holds no secret, and its
	// mode is its owner's business.
	writeFile(t, cfg, 0o644, fmt.Sprintf("data_dir = %q\n", data))
	if _, out, _ := trainbot(t, "", "check", "--config", cfg); strings.Contains(out, "warning") {
		t.Errorf("check warns about a config without secrets:\n%s", out)
	}
}

// A world-readable config with a token gets its warning at start too.
func TestStartWarnsAboutAReadableConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.toml")
	writeFile(t, cfg, 0o604, fmt.Sprintf("data_dir = %q\n[telegram]\ntoken = %q\n[[jobs]]\nname = \"a\"\ncommand = [\"true\"]\n", filepath.Join(dir, "data"), testToken))
	code, _, errOut := trainbot(t, "", "console", "--config", cfg)
	if code != exitOK {
		t.Fatalf("console: exit %d: %s", code, errOut)
	}
	if strings.Count(errOut, "config readable by others") != 1 || !strings.Contains(errOut, "fix=\"chmod 600 "+cfg+"\"") {
		t.Errorf("stderr should warn once with the fix:\n%s", errOut)
	}
}

// [store] shared_group gives the data directory to the group: 2750, files
// 0640, and says so.
func TestSharedGroup(t *testing.T) {
	g, err := user.LookupGroupId(strconv.Itoa(os.Getgid()))
	if err != nil {
		t.Skipf("no name for gid %d: %v", os.Getgid(), err)
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfg := filepath.Join(dir, "c.toml")
	writeFile(t, cfg, 0o600, fmt.Sprintf("data_dir = %q\n[store]\nshared_group = %q\n[[jobs]]\nname = \"env\"\ncommand = [\"env\"]\n", data, g.Name))
	code, _, errOut := trainbot(t, "开始\n", "console", "--config", cfg)
	if code != exitOK {
		t.Fatalf("console: exit %d: %s", code, errOut)
	}
	checkPrivate(t, data, 0o750|os.ModeSetgid, 0o640)
	code, out, _ := trainbot(t, "", "check", "--config", cfg)
	if code != exitOK || !strings.Contains(out, "is shared with group "+g.Name+" (mode 2750, files 0640)") || strings.Contains(out, "warning") {
		t.Errorf("check: exit %d:\n%s", code, out)
	}
	writeFile(t, cfg, 0o600, "[store]\nshared_group = \"no-such-group-xyz\"\n")
	if code, _, errOut := trainbot(t, "", "check", "--config", cfg); code != exitFail || !strings.Contains(errOut, `store.shared_group: no group "no-such-group-xyz" on this host`) {
		t.Errorf("an unknown group: exit %d: %s", code, errOut)
	}
}

func TestAuditFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--user", "eve"}, `--user "eve": want a user id`},
		{[]string{"--limit", "0"}, "--limit 0: want 1 or more"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		code, _, errOut := trainbot(t, "", append([]string{"audit", "--data", t.TempDir()}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("audit %v: exit %d, %q; want usage error %q", tc.args, code, errOut, tc.want)
		}
	}
}
