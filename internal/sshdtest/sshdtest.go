// Package sshdtest starts real OpenSSH servers on 127.0.0.1 for tests
// (Debian's openssh-server): each with its own sshd_config, host key and
// authorized key, as the current user, stopped at the end of the test. A
// test that finds no sshd skips, saying why; under CI=true it fails
// instead (.ci/run installs openssh-server): CI cannot pass with its SSH
// tests unrun.
package sshdtest

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Path is where Debian installs sshd (it must be started by its absolute
// path: it re-executes itself).
const Path = "/usr/sbin/sshd"

// Require skips t when there is no sshd; under CI=true it fails t.
func Require(t testing.TB) {
	t.Helper()
	if why := Missing(); why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and the SSH tests cannot run: %s", why)
		}
		t.Skip(why)
	}
}

// Missing says why no sshd can be started here ("" when one can).
var Missing = sync.OnceValue(func() string {
	if _, err := os.Stat(Path); err != nil {
		return fmt.Sprintf("no OpenSSH server (%v): apt-get install openssh-server", err)
	}
	if os.Geteuid() == 0 {
		// As root, sshd wants its privilege separation directory, which
		// only the service's start makes.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			return fmt.Sprintf("sshd as root needs /run/sshd: %v", err)
		}
	}
	return ""
})

// Key is a generated ed25519 key pair.
type Key struct {
	// File is the private key in OpenSSH's format (0600).
	File   string
	Signer ssh.Signer
	// Private is the key itself (ed25519.PrivateKey, *ecdsa.PrivateKey).
	Private any
}

// Public is the public key.
func (k Key) Public() ssh.PublicKey { return k.Signer.PublicKey() }

// NewKey writes a new ed25519 private key to dir/name.
func NewKey(t testing.TB, dir, name string) Key {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return writeKey(t, dir, name, priv)
}

func newECDSAKey(t testing.TB, dir, name string) Key {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return writeKey(t, dir, name, priv)
}

// writeKey writes priv to dir/name in OpenSSH's format, unencrypted.
func writeKey(t testing.TB, dir, name string, priv crypto.Signer) Key {
	t.Helper()
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, name)
	if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return Key{File: file, Signer: signer, Private: priv}
}

// Options change a server.
type Options struct {
	// HostKey is the server's key, ClientKey the one it lets in
	// (default: new ones).
	HostKey, ClientKey *Key
	// SetEnv are variables every session gets (sshd's SetEnv).
	SetEnv []string
	// Port to listen on (default: a free one).
	Port int
	// ECDSA gives the server an ECDSA P-256 host key too (ECDSAKey),
	// which golang.org/x/crypto/ssh prefers to ed25519 by default.
	ECDSA bool
}

// Server is one running sshd.
type Server struct {
	Addr    string // "127.0.0.1:PORT"
	Port    int
	User    string
	HostKey Key
	// ECDSAKey is the second host key, with Options.ECDSA.
	ECDSAKey *Key
	// ClientKey is the key the server lets User in with.
	ClientKey Key
	Dir       string
	// Home is the sessions' $HOME (sshd's SetEnv), a directory of the test.
	Home string

	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// Start starts an sshd for t and stops it when t ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	Require(t)
	dir := t.TempDir()
	s := &Server{Dir: dir, done: make(chan struct{}), log: filepath.Join(dir, "sshd.log")}
	if o.HostKey != nil {
		s.HostKey = *o.HostKey
		b, err := os.ReadFile(o.HostKey.File)
		if err != nil {
			t.Fatal(err)
		}
		s.HostKey.File = filepath.Join(dir, "host_key")
		if err := os.WriteFile(s.HostKey.File, b, 0o600); err != nil {
			t.Fatal(err)
		}
	} else {
		s.HostKey = NewKey(t, dir, "host_key")
	}
	if o.ClientKey != nil {
		s.ClientKey = *o.ClientKey
	} else {
		s.ClientKey = NewKey(t, dir, "client_key")
	}
	auth := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(auth, ssh.MarshalAuthorizedKey(s.ClientKey.Public()), 0o600); err != nil {
		t.Fatal(err)
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	s.User = u.Username
	s.Port = o.Port
	if s.Port == 0 {
		s.Port = freePort(t)
	}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
	conf := []string{
		"Port " + strconv.Itoa(s.Port),
		"ListenAddress 127.0.0.1",
		"HostKey " + s.HostKey.File,
		"AuthorizedKeysFile " + auth,
		"PidFile none",
		"UsePAM no",
		"StrictModes no",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"PubkeyAuthentication yes",
		"PermitRootLogin prohibit-password",
		"AllowTcpForwarding yes",
		"LogLevel INFO",
	}
	// The sessions' home is the test's: the user's own shell startup
	// files (a ~/.bashrc that bash reads for sshd's commands) stay out.
	s.Home = filepath.Join(dir, "home")
	if err := os.Mkdir(s.Home, 0o700); err != nil {
		t.Fatal(err)
	}
	// One SetEnv line: sshd keeps the first.
	conf = append(conf, "SetEnv "+strings.Join(append([]string{"HOME=" + s.Home}, o.SetEnv...), " "))
	if o.ECDSA {
		k := newECDSAKey(t, dir, "host_key_ecdsa")
		s.ECDSAKey = &k
		conf = append(conf, "HostKey "+k.File)
	}
	cfg := filepath.Join(dir, "sshd_config")
	if err := os.WriteFile(cfg, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A file, not a pipe: the sessions' sshd processes inherit it, and
	// Wait would wait for them to close a pipe.
	logf, err := os.Create(s.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	s.cmd = exec.Command(Path, "-D", "-e", "-f", cfg)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start sshd: %v", err)
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	t.Cleanup(s.Stop)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err == nil {
			c.Close()
			return s
		}
		select {
		case <-s.done:
			t.Fatalf("sshd exited at start: %v\n%s", s.cmd.ProcessState, s.Log())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd does not listen on %s after 10s:\n%s", s.Addr, s.Log())
		}
	}
}

// KnownHostsLine is the known_hosts line that accepts the server's key.
func (s *Server) KnownHostsLine() string {
	return knownhosts.Line([]string{s.Addr}, s.HostKey.Public())
}

// Log is what sshd wrote.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.log)
	return string(b)
}

// Pause stops the server and every session it serves (SIGSTOP to sshd
// and its descendants: each connection's sshd is in a session of its
// own): connections stay open and nothing answers.
func (s *Server) Pause() { s.signalTree(syscall.SIGSTOP) }

// Resume continues a paused server.
func (s *Server) Resume() { s.signalTree(syscall.SIGCONT) }

// signalTree signals sshd and its descendants, parents first.
func (s *Server) signalTree(sig syscall.Signal) {
	for _, pid := range tree(s.cmd.Process.Pid) {
		syscall.Kill(pid, sig)
	}
}

// KillSessions kills (SIGKILL) the sshd processes that serve the
// connections — the listening sshd's children — and nothing below them:
// their commands see their input and output end, as when a network or a
// server's sshd goes away. It returns how many it killed.
func (s *Server) KillSessions() int {
	pids := tree(s.cmd.Process.Pid)
	var killed []int
	for _, pid := range pids[1:] {
		if ppid(pid) == s.cmd.Process.Pid {
			syscall.Kill(pid, syscall.SIGKILL)
			killed = append(killed, pid)
		}
	}
	// Until each has exited (gone, or a zombie): only then are their
	// commands no longer below sshd (a Stop right after must not reach
	// them). At most 5 s.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		alive := false
		for _, pid := range killed {
			b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
			if i := bytes.LastIndexByte(b, ')'); err == nil && i >= 0 && i+2 < len(b) && b[i+2] != 'Z' {
				alive = true
			}
		}
		if !alive {
			break
		}
	}
	return len(killed)
}

// ppid is the parent of pid (0 when unknown).
func ppid(pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// Stop stops the server and its sessions, and waits (at most 10 s).
func (s *Server) Stop() {
	pids := tree(s.cmd.Process.Pid)
	for _, pid := range pids[1:] {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	syscall.Kill(s.cmd.Process.Pid, syscall.SIGCONT)
	syscall.Kill(s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		syscall.Kill(s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
}

// tree is pid and its descendants, from /proc.
func tree(pid int) []int {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid …": comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			children[ppid] = append(children[ppid], n)
		}
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
