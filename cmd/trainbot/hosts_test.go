package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/trainbot/trainbot/hosts"
	"github.com/trainbot/trainbot/internal/sshdtest"
)

// hostEntry is a [[hosts]] entry for s, with a known_hosts that accepts
// its key when known.
func hostEntry(t *testing.T, name string, s *sshdtest.Server, known bool, extra string) string {
	t.Helper()
	kh := filepath.Join(t.TempDir(), "known_hosts")
	line := ""
	if known {
		line = s.KnownHostsLine() + "\n"
	}
	if err := os.WriteFile(kh, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("[[hosts]]\nname = %q\naddress = %q\nuser = %q\nidentity_file = %q\nknown_hosts = %q\n%s\n",
		name, s.Addr, s.User, s.ClientKey.File, kh, extra)
}

func writeConfig(t *testing.T, doc string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "trainbot.toml")
	if err := os.WriteFile(p, []byte("data_dir = "+strconv.Quote(t.TempDir())+"\n"+doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The remote trainbot is this test binary (sshd gives every session
// TRAINBOT_TEST_MAIN=1, so that it plays trainbot): hosts install copies
// it, through a jump host too, and hosts check then passes on each.
func TestHostsInstallThenCheck(t *testing.T) {
	env := sshdtest.Options{SetEnv: []string{"TRAINBOT_TEST_MAIN=1"}}
	h1 := sshdtest.Start(t, env)
	bastion := sshdtest.Start(t, env)
	remote := t.TempDir()
	bin1, bin2 := filepath.Join(remote, "h1", "bin", "trainbot"), filepath.Join(remote, "h2", "bin", "trainbot")
	cfg := writeConfig(t,
		hostEntry(t, "h1", h1, true, fmt.Sprintf("trainbot = %q\ndata_dir = %q", bin1, filepath.Join(remote, "h1", "data")))+
			hostEntry(t, "bastion", bastion, true, "")+
			hostEntry(t, "h2", h1, true, fmt.Sprintf("jump = \"bastion\"\ntrainbot = %q", bin2)))

	code, out, errOut := trainbot(t, "", "hosts", "install", "--config", cfg, "h1")
	if code != 0 || !strings.Contains(out, "installed trainbot ") || !strings.Contains(out, "at "+bin1+" on h1") || !strings.Contains(out, "(there was none)") {
		t.Fatalf("install h1: %d\n%s%s", code, out, errOut)
	}
	t.Log(strings.TrimSpace(out))
	exe, _ := os.Executable()
	want, _ := os.ReadFile(exe)
	got, err := os.ReadFile(bin1)
	if st, _ := os.Stat(bin1); err != nil || !bytes.Equal(got, want) || st.Mode().Perm() != 0o755 {
		t.Fatalf("the installed file is not this binary (%d of %d bytes, %v)", len(got), len(want), err)
	}
	if code, out, errOut := trainbot(t, "", "hosts", "install", "--config", cfg, "h1"); code != 0 || !strings.Contains(out, "already has this trainbot") {
		t.Errorf("install again: %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := trainbot(t, "", "hosts", "install", "--config", cfg, "h2"); code != 0 || !strings.Contains(out, "at "+bin2+" on h2") {
		t.Fatalf("install h2 through the bastion: %d\n%s%s", code, out, errOut)
	}

	code, out, errOut = trainbot(t, "", "hosts", "check", "--config", cfg, "h1", "h2")
	if code != 0 {
		t.Fatalf("check: %d\n%s%s", code, out, errOut)
	}
	t.Logf("hosts check:\n%s", out)
	fp := ssh.FingerprintSHA256(h1.HostKey.Public())
	for _, re := range []string{
		`(?m)^h1 +reach +ok +127\.0\.0\.1:\d+ as \S+ in \S+$`,
		`(?m)^h1 +host key +ok +ssh-ed25519 ` + regexp.QuoteMeta(fp),
		`(?m)^h1 +trainbot +ok +` + regexp.QuoteMeta(bin1) + ` .*protocol ` + strconv.Itoa(hosts.Protocol) + `$`,
		`(?m)^h1 +nvml +ok +`,
		`(?m)^h1 +disk +ok +\S+ \S*B free in ` + regexp.QuoteMeta(filepath.Join(remote, "h1")) + `$`,
		`(?m)^h2 +reach +ok +127\.0\.0\.1:\d+ via bastion`,
		`(?m)^h2 +trainbot +ok +` + regexp.QuoteMeta(bin2),
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("check does not say %s:\n%s", re, out)
		}
	}
}

// A host with an unknown key, one with a changed key and one whose
// trainbot speaks another protocol fail the check, each saying why.
func TestHostsCheckFailures(t *testing.T) {
	s := sshdtest.Start(t, sshdtest.Options{})
	fake := filepath.Join(t.TempDir(), "trainbot")
	script := fmt.Sprintf("#!/bin/sh\necho '{\"version\":\"v9.9.9\",\"revision\":\"abc\",\"modified\":\"false\",\"go\":\"go1.26.8\",\"protocol\":%d}'\n", hosts.Protocol+1)
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	other := sshdtest.NewKey(t, t.TempDir(), "other")
	changed := hostEntry(t, "changed", s, false, "")
	khChanged := regexp.MustCompile(`known_hosts = "([^"]+)"`).FindStringSubmatch(changed)[1]
	if err := os.WriteFile(khChanged, []byte(strings.Replace(s.KnownHostsLine(), string(bytes.TrimSpace(ssh.MarshalAuthorizedKey(s.HostKey.Public()))),
		string(bytes.TrimSpace(ssh.MarshalAuthorizedKey(other.Public()))), 1)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, hostEntry(t, "unknown", s, false, "")+changed+hostEntry(t, "skew", s, true, fmt.Sprintf("trainbot = %q", fake)))
	code, out, errOut := trainbot(t, "", "hosts", "check", "--config", cfg)
	if code != 1 {
		t.Fatalf("check: %d, want 1\n%s%s", code, out, errOut)
	}
	t.Logf("hosts check:\n%s", out)
	fp := regexp.QuoteMeta(ssh.FingerprintSHA256(s.HostKey.Public()))
	for _, re := range []string{
		`(?m)^unknown +host key +FAIL .*` + fp,
		`ssh-keyscan -p ` + strconv.Itoa(s.Port) + ` 127\.0\.0\.1 >> `,
		`(?m)^unknown +trainbot +skip`,
		`(?m)^changed +host key +FAIL .*CHANGED.*` + fp + `.*` + regexp.QuoteMeta(khChanged) + `:1`,
		`(?m)^skew +trainbot +FAIL +host skew runs trainbot v9\.9\.9 .*protocol ` + strconv.Itoa(hosts.Protocol+1) + `, this hub trainbot .*protocol ` + strconv.Itoa(hosts.Protocol),
		`(?m)^3 of 3 hosts failed$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("check does not say %s:\n%s", re, out)
		}
	}
}

func TestVersionJSON(t *testing.T) {
	code, out, errOut := trainbot(t, "", "version", "--json")
	if code != 0 || !strings.Contains(out, `"protocol": `+strconv.Itoa(hosts.Protocol)) || !strings.Contains(out, `"revision": `) || !strings.Contains(out, `"modified": `) || !strings.Contains(out, `"version": `) {
		t.Errorf("version --json: %d %s %s", code, out, errOut)
	}
}

func TestHostsUsage(t *testing.T) {
	if code, out, _ := trainbot(t, "", "hosts", "--help"); code != 0 || !strings.Contains(out, "trainbot hosts install --config FILE [--force] NAME") {
		t.Errorf("hosts --help: %d %s", code, out)
	}
	for _, args := range [][]string{{"hosts"}, {"hosts", "nope"}, {"hosts", "check"}, {"hosts", "install", "--config", "x.toml"}} {
		if code, _, errOut := trainbot(t, "", args...); code != 2 {
			t.Errorf("%v: %d %s, want the usage status 2", args, code, errOut)
		}
	}
	cfg := writeConfig(t, "[[hosts]]\nname = \"a\"\naddress = \"127.0.0.1:1\"\n")
	if code, _, errOut := trainbot(t, "", "hosts", "check", "--config", cfg, "b"); code != 1 || !strings.Contains(errOut, `no host "b"`) || !strings.Contains(errOut, "the hosts are a") {
		t.Errorf("unknown name: %d %s", code, errOut)
	}
	// A host that does not answer fails its reach, and the rest is skipped.
	code, out, _ := trainbot(t, "", "hosts", "check", "--config", cfg)
	if code != 1 || !regexp.MustCompile(`(?m)^a +reach +FAIL .*connect to a \(127\.0\.0\.1:1\)`).MatchString(out) || !regexp.MustCompile(`(?m)^a +disk +skip`).MatchString(out) {
		t.Errorf("unreachable: %d\n%s", code, out)
	}
}
