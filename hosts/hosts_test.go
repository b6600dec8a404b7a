package hosts_test

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/trainbot/trainbot/bot/reconnect"
	"github.com/trainbot/trainbot/hosts"
	"github.com/trainbot/trainbot/internal/sshdtest"
)

// target is a Target for s whose known_hosts accepts its key.
func target(t *testing.T, name string, s *sshdtest.Server) *hosts.Target {
	t.Helper()
	kh := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(kh, []byte(s.KnownHostsLine()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return &hosts.Target{Name: name, Address: s.Addr, User: s.User, IdentityFile: s.ClientKey.File, KnownHosts: kh, Trainbot: "trainbot"}
}

func dial(t *testing.T, tg *hosts.Target, o hosts.Options) *hosts.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := hosts.Dial(ctx, tg, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func run(t *testing.T, c *hosts.Client, line, stdin string) (hosts.Result, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	res, err := c.Run(ctx, hosts.Cmd{Line: line, Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errOut})
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	return res, out.String(), errOut.String()
}

func TestDialAndRun(t *testing.T) {
	s := sshdtest.Start(t, sshdtest.Options{})
	c := dial(t, target(t, "h1", s), hosts.Options{})
	t.Logf("dial to loopback sshd: %s", c.DialTime)
	if got, want := ssh.FingerprintSHA256(c.HostKey), ssh.FingerprintSHA256(s.HostKey.Public()); got != want {
		t.Errorf("host key %s, want %s", got, want)
	}
	res, out, errOut := run(t, c, "cat; echo to-stderr >&2; exit 3", "from stdin\n")
	if res.Status != 3 || out != "from stdin\n" || errOut != "to-stderr\n" {
		t.Errorf("got %+v %q %q, want status 3, stdin echoed, stderr", res, out, errOut)
	}
	if res, _, _ := run(t, c, "kill -KILL $$", ""); res.Signal != "KILL" || res.Status != -1 {
		t.Errorf("killed: got %+v, want signal KILL", res)
	}
	// Sessions run at once on the one connection.
	errs := make(chan error, 5)
	for i := range 5 {
		go func() {
			var out bytes.Buffer
			_, err := c.Run(context.Background(), hosts.Cmd{Line: "sleep 0.2; echo " + strconv.Itoa(i), Stdout: &out})
			if err == nil && out.String() != strconv.Itoa(i)+"\n" {
				err = fmt.Errorf("session %d got %q", i, out.String())
			}
			errs <- err
		}()
	}
	for range 5 {
		select {
		case err := <-errs:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("sessions did not end in 20s")
		}
	}
	// A cancelled command's session is closed.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	if _, err := c.Run(ctx, hosts.Cmd{Line: "sleep 30"}); !errors.Is(err, context.DeadlineExceeded) || time.Since(began) > 10*time.Second {
		t.Errorf("cancelled: got %v after %s, want the deadline soon", err, time.Since(began))
	}
}

// Without an identity file the ssh-agent signs; a key file with a
// passphrase is refused with the advice to use the agent.
func TestAgentAndPassphrase(t *testing.T) {
	s := sshdtest.Start(t, sshdtest.Options{})
	keyring := agent.NewKeyring()
	if err := keyring.Add(agent.AddedKey{PrivateKey: s.ClientKey.Private}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			agent.ServeAgent(keyring, c)
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close(); <-served })
	tg := target(t, "h1", s)
	tg.IdentityFile = ""
	c := dial(t, tg, hosts.Options{AgentSocket: sock})
	if res, out, _ := run(t, c, "echo agent", ""); res.Status != 0 || out != "agent\n" {
		t.Errorf("got %+v %q", res, out)
	}
	if _, err := hosts.Dial(context.Background(), tg, hosts.Options{}); err == nil || !strings.Contains(err.Error(), "no identity_file and no ssh-agent") {
		t.Errorf("neither: got %v", err)
	}
	block, err := ssh.MarshalPrivateKeyWithPassphrase(s.ClientKey.Private, "", []byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	tg.IdentityFile = filepath.Join(t.TempDir(), "id_locked")
	if err := os.WriteFile(tg.IdentityFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := hosts.Dial(context.Background(), tg, hosts.Options{}); err == nil || !strings.Contains(err.Error(), "ssh-add "+tg.IdentityFile) {
		t.Errorf("passphrase: got %v, want the ssh-add advice", err)
	}
}

func TestUnknownHostKeyIsRefusedWithItsFingerprint(t *testing.T) {
	s := sshdtest.Start(t, sshdtest.Options{})
	tg := target(t, "h1", s)
	tg.KnownHosts = filepath.Join(t.TempDir(), "no-such-known_hosts")
	_, err := hosts.Dial(context.Background(), tg, hosts.Options{DialTimeout: 10 * time.Second})
	var he *hosts.HostKeyError
	if !errors.As(err, &he) || !he.Unknown() {
		t.Fatalf("got %v, want an unknown host key", err)
	}
	fp := ssh.FingerprintSHA256(s.HostKey.Public())
	msg := err.Error()
	for _, want := range []string{fp, "ssh-keyscan -p " + strconv.Itoa(s.Port) + " 127.0.0.1 >> " + tg.KnownHosts, s.KnownHostsLine()} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	// The line it gives is the one that accepts the key.
	if err := os.WriteFile(tg.KnownHosts, []byte(he.Line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dial(t, tg, hosts.Options{})
}

func TestChangedHostKeyIsRefusedNamingTheLine(t *testing.T) {
	s := sshdtest.Start(t, sshdtest.Options{})
	tg := target(t, "h1", s)
	old := sshdtest.NewKey(t, t.TempDir(), "old")
	other := sshdtest.NewKey(t, t.TempDir(), "other")
	kh := "# the lab's hosts\n" + knownhosts.Line([]string{"127.0.0.2:" + strconv.Itoa(s.Port)}, s.HostKey.Public()) + "\n" +
		"[127.0.0.1]:" + strconv.Itoa(s.Port) + " " + string(bytes.TrimSpace(ssh.MarshalAuthorizedKey(old.Public()))) + "\n" +
		"otherhost " + string(bytes.TrimSpace(ssh.MarshalAuthorizedKey(other.Public()))) + "\n"
	if err := os.WriteFile(tg.KnownHosts, []byte(kh), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := hosts.Dial(context.Background(), tg, hosts.Options{DialTimeout: 10 * time.Second})
	var he *hosts.HostKeyError
	if !errors.As(err, &he) || he.Unknown() {
		t.Fatalf("got %v, want a changed host key", err)
	}
	if len(he.Known) != 1 || he.Known[0].Line != 3 || he.Known[0].Fingerprint != ssh.FingerprintSHA256(old.Public()) {
		t.Errorf("known lines %+v, want line 3 with the old key", he.Known)
	}
	for _, want := range []string{"CHANGED", ssh.FingerprintSHA256(s.HostKey.Public()), tg.KnownHosts + ":3", "ssh-keygen -R '[127.0.0.1]:" + strconv.Itoa(s.Port) + "'"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// A server with an ed25519 and an ECDSA key, known by its ed25519 one:
// the client's default preference would ask for the ECDSA key and see a
// "changed" key; it asks for what known_hosts holds.
func TestAnotherKeyTypeIsNotAChangedKey(t *testing.T) {
	s := sshdtest.Start(t, sshdtest.Options{ECDSA: true})
	c := dial(t, target(t, "h1", s), hosts.Options{})
	if c.HostKey.Type() != ssh.KeyAlgoED25519 {
		t.Errorf("got a %s host key, want the known ed25519 one", c.HostKey.Type())
	}
	// Known by its ECDSA key only, it is asked for that one.
	tg := target(t, "h1", s)
	if err := os.WriteFile(tg.KnownHosts, []byte(knownhosts.Line([]string{s.Addr}, s.ECDSAKey.Public())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c := dial(t, tg, hosts.Options{}); c.HostKey.Type() != ssh.KeyAlgoECDSA256 {
		t.Errorf("got a %s host key, want the known ECDSA one", c.HostKey.Type())
	}
}

func TestKeepaliveClosesADeadConnection(t *testing.T) {
	s := sshdtest.Start(t, sshdtest.Options{})
	const interval, missed = 100 * time.Millisecond, 3
	c := dial(t, target(t, "h1", s), hosts.Options{KeepaliveInterval: interval, KeepaliveMissed: missed})
	// Answered keepalives keep it up.
	select {
	case <-c.Done():
		t.Fatalf("lost a live connection: %v", c.Err())
	case <-time.After(5 * interval * missed):
	}
	s.Pause()
	began := time.Now()
	bound := time.Duration(missed+1)*interval + 2*time.Second
	select {
	case <-c.Done():
	case <-time.After(bound):
		t.Fatalf("a dead connection is not found lost after %s", bound)
	}
	took := time.Since(began)
	t.Logf("dead connection found lost in %s (interval %s, %d missed)", took, interval, missed)
	if !errors.Is(c.Err(), hosts.ErrKeepalive) {
		t.Errorf("lost for %v, want %v", c.Err(), hosts.ErrKeepalive)
	}
	if took < time.Duration(missed-1)*interval {
		t.Errorf("lost after %s, before %d intervals could be missed", took, missed)
	}
	s.Resume()
}

func TestJumpHost(t *testing.T) {
	bastion := sshdtest.Start(t, sshdtest.Options{})
	inner := sshdtest.Start(t, sshdtest.Options{})
	tg := target(t, "gpu", inner)
	tg.Jump = target(t, "bastion", bastion)
	c := dial(t, tg, hosts.Options{})
	t.Logf("dial through a jump host: %s", c.DialTime)
	if res, out, _ := run(t, c, "echo through", ""); res.Status != 0 || out != "through\n" {
		t.Errorf("got %+v %q", res, out)
	}
	if !strings.Contains(bastion.Log(), "Accepted publickey") || !strings.Contains(inner.Log(), "Accepted publickey") {
		t.Errorf("want a login on both: bastion\n%s\ninner\n%s", bastion.Log(), inner.Log())
	}
	// The target's key is checked as the target's, not the bastion's.
	tg.KnownHosts = tg.Jump.KnownHosts
	_, err := hosts.Dial(context.Background(), tg, hosts.Options{})
	var he *hosts.HostKeyError
	if !errors.As(err, &he) || he.Host != "gpu" || !he.Unknown() {
		t.Errorf("target's key against the bastion's known_hosts: got %v, want gpu's key unknown", err)
	}
}

// fakeTrainbot writes a remote trainbot that prints v for version --json.
func fakeTrainbot(t *testing.T, v hosts.Version) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "trainbot")
	script := fmt.Sprintf("#!/bin/sh\n[ \"$1 $2\" = 'version --json' ] || exit 2\necho '{\"version\":%q,\"revision\":\"abc\",\"modified\":\"false\",\"go\":\"go1.26.8\",\"protocol\":%d}'\n", v.Version, v.Protocol)
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRemoteVersionAndTheProtocolRule(t *testing.T) {
	s := sshdtest.Start(t, sshdtest.Options{})
	tg := target(t, "h1", s)
	hub := hosts.Version{Version: "v1.4.0", Protocol: hosts.Protocol}
	tg.Trainbot = fakeTrainbot(t, hosts.Version{Version: "v1.3.0", Protocol: hosts.Protocol})
	c := dial(t, tg, hosts.Options{})
	v, err := c.RemoteVersion(context.Background())
	if err != nil || v.Version != "v1.3.0" || v.Protocol != hosts.Protocol {
		t.Fatalf("got %+v %v", v, err)
	}
	if err := hosts.CheckVersion("h1", hub, v); err != nil {
		t.Errorf("same protocol: %v", err)
	}
	if n := hosts.Decide(hub, v, nil, false); n != hosts.NeedOlder || !n.Install() {
		t.Errorf("older: %v", n)
	}

	tg.Trainbot = fakeTrainbot(t, hosts.Version{Version: "v2.0.0", Protocol: hosts.Protocol + 1})
	v, err = c.RemoteVersion(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	err = hosts.CheckVersion("h1", hub, v)
	var pe *hosts.ProtocolError
	if !errors.As(err, &pe) {
		t.Fatalf("got %v, want a ProtocolError", err)
	}
	for _, want := range []string{"v2.0.0", "protocol " + strconv.Itoa(hosts.Protocol+1), "v1.4.0", "protocol " + strconv.Itoa(hosts.Protocol)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %q", err, want)
		}
	}

	tg.Trainbot = filepath.Join(t.TempDir(), "none", "trainbot")
	if _, err := c.RemoteVersion(context.Background()); !errors.Is(err, hosts.ErrNoTrainbot) {
		t.Errorf("missing: got %v, want %v", err, hosts.ErrNoTrainbot)
	}
}

func TestInstallReplacesAtomically(t *testing.T) {
	s := sshdtest.Start(t, sshdtest.Options{})
	tg := target(t, "h1", s)
	tg.Trainbot = filepath.Join(t.TempDir(), "new dir", "trainbot")
	c := dial(t, tg, hosts.Options{})
	bin := filepath.Join(t.TempDir(), "bin")
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	if err := os.WriteFile(bin, data, 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := c.Install(context.Background(), bin)
	if err != nil || p != tg.Trainbot {
		t.Fatalf("install: %q %v, want %q", p, err, tg.Trainbot)
	}
	got, err := os.ReadFile(tg.Trainbot)
	st, _ := os.Stat(tg.Trainbot)
	if err != nil || !bytes.Equal(got, data) || st.Mode().Perm() != 0o755 {
		t.Errorf("installed %d bytes (%v), mode %v; want %d, 0755", len(got), err, st.Mode(), len(data))
	}
	left, _ := filepath.Glob(tg.Trainbot + ".*")
	if len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	tg.Trainbot = "no-such-trainbot-on-path"
	if _, err := c.Install(context.Background(), bin); err == nil || !strings.Contains(err.Error(), "not on the remote PATH") {
		t.Errorf("bare name not on PATH: got %v", err)
	}
}

func TestHostRedialsWithTheBackoff(t *testing.T) {
	s := sshdtest.Start(t, sshdtest.Options{})
	tg := target(t, "h1", s)
	tg.Trainbot = fakeTrainbot(t, hosts.Version{Version: "v1.0.0", Protocol: hosts.Protocol})
	h := &hosts.Host{Target: tg, Opts: hosts.Options{KeepaliveInterval: 100 * time.Millisecond},
		Hub: hosts.Version{Version: "v1.0.0", Protocol: hosts.Protocol}, Backoff: reconnect.Backoff{Initial: 50 * time.Millisecond, Max: 200 * time.Millisecond}}
	h.Start(context.Background())
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c1, err := h.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Stop()
	sshdtest.Start(t, sshdtest.Options{HostKey: &s.HostKey, ClientKey: &s.ClientKey, Port: s.Port})
	deadline := time.Now().Add(20 * time.Second)
	for {
		c2, err := h.Client(ctx)
		if err == nil && c2 != c1 {
			if res, out, _ := run(t, c2, "echo again", ""); res.Status != 0 || out != "again\n" {
				t.Errorf("got %+v %q", res, out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new connection after 20s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestHostRefusesAnotherProtocol(t *testing.T) {
	s := sshdtest.Start(t, sshdtest.Options{})
	tg := target(t, "h1", s)
	tg.Trainbot = fakeTrainbot(t, hosts.Version{Version: "v9.0.0", Protocol: hosts.Protocol + 1})
	h := &hosts.Host{Target: tg, Hub: hosts.Version{Version: "v1.0.0", Protocol: hosts.Protocol}, Backoff: reconnect.Backoff{Initial: time.Second}}
	h.Start(context.Background())
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_, err := h.Client(ctx)
	var pe *hosts.ProtocolError
	if !errors.As(err, &pe) || pe.Peer.Version != "v9.0.0" {
		t.Errorf("got %v, want the ProtocolError", err)
	}
}

func TestCompareVersions(t *testing.T) {
	for _, c := range []struct {
		a, b string
		cmp  int
		ok   bool
	}{
		{"v1.2.3", "v1.2.3", 0, true},
		{"v1.2.3", "v1.10.0", -1, true},
		{"v2.0.0", "v1.99.99", 1, true},
		{"v1.0.0-rc.1", "v1.0.0", -1, true},
		{"v1.0.0-rc.2", "v1.0.0-rc.10", -1, true},
		{"v0.0.0-20261201223342-d5fcc38c5af1", "v0.0.0-20261202010000-aaaaaaaaaaaa", -1, true},
		{"v0.0.0-20261201223342-d5fcc38c5af1+dirty", "v0.0.0-20261201223342-d5fcc38c5af1", 0, true},
		{"(devel)", "v1.0.0", 0, false},
		{"unknown", "unknown", 0, false},
	} {
		if cmp, ok := hosts.CompareVersions(c.a, c.b); cmp != c.cmp || ok != c.ok {
			t.Errorf("CompareVersions(%q, %q) = %d %v, want %d %v", c.a, c.b, cmp, ok, c.cmp, c.ok)
		}
	}
}

func TestDecide(t *testing.T) {
	local := hosts.Version{Version: "v1.2.0", Revision: "r2", Modified: "false", Protocol: 1}
	for _, c := range []struct {
		name   string
		remote hosts.Version
		err    error
		force  bool
		want   hosts.Need
	}{
		{"missing", hosts.Version{}, fmt.Errorf("x: %w", hosts.ErrNoTrainbot), false, hosts.NeedMissing},
		{"protocol", hosts.Version{Version: "v1.2.0", Protocol: 2}, nil, false, hosts.NeedProtocol},
		{"older", hosts.Version{Version: "v1.1.0", Protocol: 1}, nil, false, hosts.NeedOlder},
		{"same", local, nil, false, hosts.NeedSame},
		{"newer", hosts.Version{Version: "v1.3.0", Protocol: 1}, nil, false, hosts.NeedNewer},
		{"devel", hosts.Version{Version: "(devel)", Protocol: 1}, nil, false, hosts.NeedUnknown},
		{"forced", hosts.Version{Version: "v1.3.0", Protocol: 1}, nil, true, hosts.NeedForced},
	} {
		if got := hosts.Decide(local, c.remote, c.err, c.force); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{"trainbot": "trainbot", "/opt/a b/trainbot": "'/opt/a b/trainbot'", "it's": `'it'\''s'`, "": "''"} {
		if got := hosts.Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
	if got := hosts.QuotePath("~/bin/train bot"); got != `"$HOME"/'bin/train bot'` {
		t.Errorf("QuotePath = %s", got)
	}
}
