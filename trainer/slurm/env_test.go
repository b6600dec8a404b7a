package slurm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sbatch's environment becomes the job's (Slurm's --export=ALL): Submit
// runs it without trainbot's secrets. A fake sbatch on PATH records what
// it got.
func TestSubmitWithoutSecrets(t *testing.T) {
	bin := t.TempDir()
	dump := filepath.Join(t.TempDir(), "env")
	fake := "#!/bin/sh\nenv > \"$FAKE_SBATCH_ENV\"\necho 4242\n"
	if err := os.WriteFile(filepath.Join(bin, "sbatch"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("FAKE_SBATCH_ENV", dump)
	t.Setenv("TRAINBOT_TELEGRAM_TOKEN", "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw")
	t.Setenv("FEISHU_SECRET", "feishu-signing-secret")
	t.Setenv("KEEP_ME", "kept")
	runDir := t.TempDir()
	id, err := Submit(context.Background(), SubmitSpec{
		RunID: 1, Job: "j", Argv: []string{"true"}, Env: []string{"TRAINBOT_RUN_ID=1"},
		SecretEnv: []string{"FEISHU_SECRET"}, RunDir: runDir, LogPath: filepath.Join(runDir, "output.log"),
	})
	if err != nil || id != "4242" {
		t.Fatalf("Submit: %q %v, want job 4242", id, err)
	}
	b, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, secret := range []string{"AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw", "feishu-signing-secret", "TRAINBOT_"} {
		if strings.Contains(got, secret) {
			t.Errorf("sbatch's environment has %q:\n%s", secret, got)
		}
	}
	if !strings.Contains(got, "KEEP_ME=kept") {
		t.Errorf("sbatch's environment lost KEEP_ME:\n%s", got)
	}
}
