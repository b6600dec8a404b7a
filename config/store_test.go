package config

import (
	"slices"
	"strings"
	"testing"
)

func TestSharedGroup(t *testing.T) {
	c, err := parse(t, "[store]\nshared_group = \"lab\"\n")
	if err != nil || c.Store.SharedGroup != "lab" {
		t.Fatalf("got %q %v, want lab", c.Store.SharedGroup, err)
	}
	if c, err := parse(t, "[store]\nshared_group = \"1234\"\n"); err != nil || c.Store.SharedGroup != "1234" {
		t.Errorf("a numeric gid: %q %v", c.Store.SharedGroup, err)
	}
	_, err = parse(t, "\n[store]\nshared_group = \"lab; rm -rf /\"\n")
	if err == nil || !strings.Contains(err.Error(), "test.toml:3: store.shared_group: want a Unix group name") {
		t.Errorf("a bad group: %v, want an error at test.toml:3", err)
	}
	c = DefaultConfig()
	if err := c.ApplyEnv([]string{"TRAINBOT_STORE_SHARED_GROUP=ml"}); err != nil || c.Store.SharedGroup != "ml" {
		t.Errorf("from the environment: %q %v, want ml", c.Store.SharedGroup, err)
	}
}

func TestSecretEnvAndSecretsInFile(t *testing.T) {
	withEnv(t, map[string]string{"WECOM_KEY": "k", "FEISHU_SECRET": "s"})
	c, err := parseWith(t, `
[example]
url = "https://example.org"
token = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"

[[push]]
kind = "wecom"
key_env = "WECOM_KEY"

[[push]]
kind = "feishu"
url = "https://open.feishu.cn/open-apis/bot/v2/hook/abc"
secret_env = "FEISHU_SECRET"

[[jobs]]
name = "lm"
command = ["python3", "train.py"]
env = { WANDB_API_KEY = "w", HF_TOKEN = "h", OMP_NUM_THREADS = "4", FEISHU_SECRET = "f" }
`)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.SecretEnv(), []string{"TRAINBOT_EXAMPLE_TOKEN", "WECOM_KEY", "FEISHU_SECRET"}; !slices.Equal(got, want) {
		t.Errorf("SecretEnv() = %q, want %q", got, want)
	}
	want := []string{"example.token", "push[1].url", "jobs[0].env.FEISHU_SECRET", "jobs[0].env.HF_TOKEN", "jobs[0].env.WANDB_API_KEY"}
	if got := c.SecretsInFile(); !slices.Equal(got, want) {
		t.Errorf("SecretsInFile() = %q, want %q", got, want)
	}
	// A token from the environment is not in the file.
	c, err = parseWith(t, "[[jobs]]\nname = \"a\"\ncommand = [\"true\"]\n")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyEnv([]string{"TRAINBOT_EXAMPLE_TOKEN=123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"}); err != nil {
		t.Fatal(err)
	}
	if got := c.SecretsInFile(); len(got) != 0 {
		t.Errorf("SecretsInFile() with the token from the environment = %q, want none", got)
	}
}
