// Package hosts reaches trainbot's GPU servers ([[hosts]]) over SSH with
// golang.org/x/crypto/ssh: Dial makes one multiplexed connection to a host
// (through its jump host, if any) with strict host-key checking and
// keepalives; Host keeps one connection per host and dials it again with
// bot/reconnect's one backoff when it is lost; a Client runs remote
// commands (Run), the remote trainbot's version and protocol are checked
// (CheckVersion) and the setup helpers `trainbot hosts check` and `trainbot
// hosts install` are Check and Install. The same connection carries the
// remote GPUs' samples (GPUJSON, which gpu/remote runs every interval)
// and is meant to carry, later, the remote runs' shims and their log
// reads, each as sessions of its own.
//
// It knows nothing of config (cmd/trainbot turns [[hosts]] into Targets),
// runs or chats: it returns facts (HostKeyError, ProtocolError, Report) and
// the caller words them.
//
// Traps of golang.org/x/crypto/ssh (v0.58.0) it handles:
//
//   - knownhosts.New fails on a file that does not exist. A missing
//     known_hosts is read as an empty one, so that a new host is "unknown,
//     here is its fingerprint and how to accept it", not "no such file".
//   - A *knownhosts.KeyError with an empty Want is an unknown host, with
//     a non-empty one a mismatch — but a mismatch is also what a server
//     that merely offers a key of another algorithm than the one on file
//     gets (the client's preference picks ecdsa, known_hosts holds
//     ed25519). HostKeyAlgorithms is limited to the types known_hosts holds
//     for the host, so a mismatch is a changed key.
//   - knownhosts matches "host" for port 22 and "[host]:port" otherwise,
//     and prefers the address given to NewClientConn over the remote
//     address: that is always the configured address, also through a jump
//     host (whose channel's remote address means nothing).
//   - ClientConfig.Timeout bounds the TCP connect only: a server that
//     accepts and never speaks holds the handshake forever. Dial closes the
//     connection when its DialTimeout or its context ends first.
//   - There are no keepalives, and SendRequest waits without a deadline on
//     a dead connection. A keepalive@openssh.com request goes out every
//     KeepaliveInterval; one not answered by the next tick is missed, and
//     KeepaliveMissed missed in a row close the connection (as OpenSSH's
//     ServerAliveInterval and ServerAliveCountMax). OpenSSH answers the
//     request with a failure: any answer counts.
//   - Nothing takes a context: a dial is cancelled by closing its
//     connection, a command by closing its session — but Session.Wait
//     returns only when the server closes the channel, which OpenSSH does
//     once the command has ended, however long that takes: Run signals
//     the command (SIGKILL, which OpenSSH honours since 7.9), closes the
//     session and returns at once, leaving Wait to a goroutine that the
//     connection's Close waits for.
//   - ParsePrivateKey of a key with a passphrase returns
//     *ssh.PassphraseMissingError: such a key goes into the ssh-agent.
//   - Session.Wait returns *ssh.ExitError for a non-zero status or a
//     signal and *ssh.ExitMissingError when the server sent neither (the
//     connection went away): Result tells the three apart.
//   - OpenSSH allows 10 sessions per connection (MaxSessions); an eleventh
//     at once is refused ("administratively prohibited"). Whatever shares
//     the connection later must count its sessions.
//   - Many servers ignore a session's signals (Session.Signal): a remote
//     command is stopped by closing its stdin or its session, and a remote
//     run will be stopped by the remote trainbot, not by a signal.
package hosts

import (
	"log/slog"
	"time"
)

// Target is one host as Dial reaches it: cmd/trainbot makes it of a
// [[hosts]] entry, with its defaults filled in.
type Target struct {
	// Name is the [[hosts]] name.
	Name string
	// Address is "host:port".
	Address string
	// User is the account to log in as.
	User string
	// IdentityFile is a private key file; "" uses the ssh-agent
	// (Options.AgentSocket).
	IdentityFile string
	// KnownHosts is the known_hosts file the host key must be in.
	KnownHosts string
	// Jump is the bastion to go through, or nil.
	Jump *Target
	// Trainbot is the remote trainbot binary (a path, "~/…", or a name on
	// the remote PATH).
	Trainbot string
	// DataDir is the remote data directory ("" is the remote default).
	DataDir string
}

// Options are how connections are made and watched; the zero value is
// the defaults.
type Options struct {
	// DialTimeout bounds a whole dial: TCP connect, handshake and
	// authentication, per hop (default 15 s).
	DialTimeout time.Duration
	// KeepaliveInterval is the time between two keepalive requests
	// (default 15 s); KeepaliveMissed the unanswered ones in a row that
	// close the connection (default 3). A dead connection is found lost
	// within (KeepaliveMissed+1)·KeepaliveInterval.
	KeepaliveInterval time.Duration
	KeepaliveMissed   int
	// AgentSocket is the ssh-agent's socket ($SSH_AUTH_SOCK), used for a
	// target without an IdentityFile.
	AgentSocket string
	// Log gets a line for each connection made and lost (nil: none).
	Log *slog.Logger
}

// Defaults of Options' zero fields.
const (
	DefaultDialTimeout       = 15 * time.Second
	DefaultKeepaliveInterval = 15 * time.Second
	DefaultKeepaliveMissed   = 3
)

func (o Options) withDefaults() Options {
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.KeepaliveInterval <= 0 {
		o.KeepaliveInterval = DefaultKeepaliveInterval
	}
	if o.KeepaliveMissed <= 0 {
		o.KeepaliveMissed = DefaultKeepaliveMissed
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return o
}
