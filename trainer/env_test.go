package trainer_test

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/trainbot/trainbot/internal/private"
	"github.com/trainbot/trainbot/trainer"
)

// A job that prints its environment shows none of trainbot's secrets, and
// neither the run's supervisor nor the run hold them; what the job
// declares in its own env reaches it.
func TestRunEnvironmentHasNoSecrets(t *testing.T) {
	secrets := map[string]string{
		"TRAINBOT_TELEGRAM_TOKEN": "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
		"FEISHU_SECRET":           "feishu-signing-secret",
		"WECOM_KEY":               "693a91f6-wecom-robot-key",
		"TRAINBOT_AUTH_OPERATORS": "87654321",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	t.Setenv("KEEP_ME", "kept")
	// "print""ed": the log's first note quotes the command, and the test
	// must wait for the child's own line, not for the note.
	j := job("env", []string{"/bin/sh", "-c", `env; echo "print""ed"; exec sleep 60`})
	j.Env = map[string]string{"WECOM_KEY": "declared-by-the-job"}
	h := newHarnessWith(t, t.TempDir(), trainer.Options{SecretEnv: []string{"FEISHU_SECRET", "WECOM_KEY"}}, j)
	r := h.start("env", nil)
	h.waitTail(r.ID, "printed")
	shimEnv, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", r.Supervisor))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.sup.Stop(r.ID, "test"); err != nil {
		t.Fatal(err)
	}
	got := h.wait(r.ID)
	log, err := os.ReadFile(got.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range secrets {
		if bytes.Contains(log, []byte(v)) {
			t.Errorf("the run printed %s's value:\n%s", k, log)
		}
		if bytes.Contains(shimEnv, []byte(v)) {
			t.Errorf("the run's supervisor has %s in its environment", k)
		}
	}
	for _, want := range []string{"KEEP_ME=kept", "WECOM_KEY=declared-by-the-job", fmt.Sprintf("TRAINBOT_RUN_ID=%d", r.ID), "TRAINBOT_METRICS_FILE=", "TRAINBOT_CONTROL_FILE="} {
		if !bytes.Contains(log, []byte(want)) {
			t.Errorf("the run's environment lacks %s:\n%s", want, log)
		}
	}
	for _, line := range strings.Split(string(log), "\n") {
		name, _, _ := strings.Cut(line, "=")
		if strings.HasPrefix(name, "TRAINBOT_") && name != "TRAINBOT_RUN_ID" && name != "TRAINBOT_RUN_DIR" && name != "TRAINBOT_METRICS_FILE" && name != "TRAINBOT_CONTROL_FILE" {
			t.Errorf("the run got %s, not one of the per-run TRAINBOT_ variables", name)
		}
	}
}

// trainbot's own files are private (umask 077), the training's are not:
// it starts with the umask trainbot had before.
func TestRunStartsWithTheUsersUmask(t *testing.T) {
	private.Restrict(false)
	want, _ := private.Original()
	h := newHarness(t, job("umask", []string{"/bin/sh", "-c", "umask"}))
	r := h.start("umask", nil)
	got := h.wait(r.ID)
	log, err := os.ReadFile(got.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), fmt.Sprintf("%04o", want)) {
		t.Errorf("the run printed umask %q, want %04o (trainbot's own is %04o)", log, want, private.Mask())
	}
	fi, err := os.Stat(got.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("output.log is %#o, want 0600", fi.Mode().Perm())
	}
}
