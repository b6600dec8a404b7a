package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/messengers"
	"github.com/trainbot/trainbot/bot/transport"
	"github.com/trainbot/trainbot/config"
)

// declare declares the sections of the transports trainbot is built with
// ([telegram]'s deprecated progress_interval among them).
func declare(c *config.Config) { transport.Declare(c, messengers.All()) }

// [chat] progress_interval paces every transport's live progress; the old
// [telegram] spelling still works, and check warns of it.
func TestProgressIntervalKey(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		body string
		want time.Duration
		warn string
	}{
		{"", 10 * time.Second, ""},
		{"[chat]\nprogress_interval = \"30s\"\n", 30 * time.Second, ""},
		{"[telegram]\nprogress_interval = \"20s\"\n", 20 * time.Second, `telegram.progress_interval: deprecated: it sets the live progress of every transport; write progress_interval = "20s" under [chat]`},
		{"[chat]\nprogress_interval = \"0s\"\n[telegram]\nprogress_interval = \"20s\"\n", 0, "[chat] progress_interval is set too"},
	} {
		path := filepath.Join(dir, "c.toml")
		if err := os.WriteFile(path, []byte("data_dir = \""+dir+"\"\n"+c.body), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(path, declare)
		if err != nil {
			t.Fatalf("%q: %v", c.body, err)
		}
		if got := cfg.ProgressInterval(); got != c.want {
			t.Errorf("%q: progress interval %s, want %s", c.body, got, c.want)
		}
		warnings := strings.Join(cfg.Warnings([]byte(c.body)), "\n")
		if c.warn == "" && strings.Contains(warnings, "progress_interval") || c.warn != "" && !strings.Contains(warnings, c.warn) {
			t.Errorf("%q: warnings %q, want %q", c.body, warnings, c.warn)
		}
	}
	path := filepath.Join(dir, "bad.toml")
	os.WriteFile(path, []byte("data_dir = \""+dir+"\"\n[chat]\nprogress_interval = \"1s\"\n"), 0o600)
	if _, err := config.Load(path, declare); err == nil || !strings.Contains(err.Error(), "bad.toml:3: chat.progress_interval: want 2s or more") {
		t.Errorf("a 1 s interval: got %v, want the key and its line", err)
	}
}

// The example's placeholders and user id are warned about, at their lines.
func TestWarningsOfTheExample(t *testing.T) {
	const example = "../config.example.toml"
	raw, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	c := config.DefaultConfig()
	declare(c)
	if err := c.Parse(example, strings.NewReader(string(raw))); err != nil {
		t.Fatal(err)
	}
	lineOf := func(prefix string) int {
		for i, l := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(l, prefix) {
				return i + 1
			}
		}
		t.Fatalf("the example has no line %q", prefix)
		return 0
	}
	got := strings.Join(c.Warnings(raw), "\n")
	for _, want := range []string{
		fmt.Sprintf("warning: %s:%d: [[push]] key: still the example's placeholder REPLACE-WITH-THE-ROBOT-KEY: put in your own value", example, lineOf(`key = "REPLACE-WITH`)),
		fmt.Sprintf("warning: %s:%d: auth.operators: 123456789 is the example's user id", example, lineOf("operators = [123456789]")),
	} {
		if !strings.Contains(got, want) {
			t.Errorf("warnings of the example lack %q:\n%s", want, got)
		}
	}
	if c.Warnings(nil) == nil {
		t.Error("without the file's text the user id is still warned about")
	}
}

// A program that is not there, and a parameter inside a shell script, are
// warned about; a literal brace and a Slurm job's program are not.
func TestWarningsOfJobs(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "run.sh")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data.txt"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, job string
		want      []string // nil: no warning
	}{
		{"not on PATH", `command = ["no-such-program-here", "{lr}"]`,
			[]string{`test.toml:3: jobs[0].command: program "no-such-program-here" is not on PATH here`}},
		{"a parameter in shell code", `command = ["sh", "-c", "python3 train.py --lr {lr} && echo ${{HOME}}"]`,
			[]string{`test.toml:3: jobs[0].command: the shell script after -c puts {lr} into shell code`, `"$TRAINBOT_PARAM_LR"`}},
		{"bash -ec", `command = ["/bin/bash", "-ec", "train --bs {bs}"]`, []string{"puts {bs} into shell code"}},
		{"a literal brace", `command = ["sh", "-c", "echo ${{HOME}}"]`, nil},
		{"a missing path", `command = ["./train.sh"]` + "\ndir = \"" + dir + "\"",
			[]string{`test.toml:3: jobs[0].command: program "./train.sh": stat ` + filepath.Join(dir, "train.sh") + `: no such file or directory`}},
		{"a directory", `command = ["` + dir + `"]`, []string{"is a directory"}},
		{"not executable", `command = ["./data.txt"]` + "\ndir = \"" + dir + "\"", []string{"is not executable (chmod +x " + filepath.Join(dir, "data.txt") + ")"}},
		{"there", `command = ["./run.sh"]` + "\ndir = \"" + dir + "\"", nil},
		{"a parameter names it", `command = ["{prog}"]`, nil},
		{"on Slurm", `command = ["no-such-program-here"]` + "\nrunner = \"slurm\"", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := "[[jobs]]\nname = \"a\"\n" + tc.job + "\n"
			c := config.DefaultConfig()
			if err := c.Parse("test.toml", strings.NewReader(doc)); err != nil {
				t.Fatal(err)
			}
			got := strings.Join(c.Warnings([]byte(doc)), "\n")
			if tc.want == nil && got != "" {
				t.Errorf("got %q, want no warning", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("got %q, want %q", got, w)
				}
			}
			if strings.Count(got, "shell code") > 1 {
				t.Errorf("one parameter warned about twice:\n%s", got)
			}
		})
	}
}
