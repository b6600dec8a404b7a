package hosts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// ErrKeepalive is why a connection whose keepalives went unanswered was
// closed.
var ErrKeepalive = errors.New("keepalives unanswered")

// Client is one connection to a host; sessions on it run commands. It is
// safe for concurrent use.
type Client struct {
	// Target is the host.
	Target *Target
	// DialTime is how long the dial took, jumps included.
	DialTime time.Duration
	// HostKey is the host key the server offered (and that was accepted).
	HostKey ssh.PublicKey

	ssh  *ssh.Client
	jump *Client
	opts Options

	done      chan struct{}
	closeOnce sync.Once
	mu        sync.Mutex
	err       error
	wg        sync.WaitGroup
}

// Dial connects to t (through t.Jump, which gets a connection of its own
// that Close closes), checking its host key against t.KnownHosts, and
// starts the keepalives. The dial is bounded by o.DialTimeout per hop and
// by ctx.
func Dial(ctx context.Context, t *Target, o Options) (*Client, error) {
	o = o.withDefaults()
	began := time.Now()
	var jump *Client
	var conn net.Conn
	var err error
	if t.Jump != nil {
		if jump, err = Dial(ctx, t.Jump, o); err != nil {
			return nil, fmt.Errorf("jump host %s: %w", t.Jump.Name, err)
		}
		dctx, cancel := context.WithTimeout(ctx, o.DialTimeout)
		conn, err = jump.ssh.DialContext(dctx, "tcp", t.Address)
		cancel()
		if err != nil {
			jump.Close()
			return nil, fmt.Errorf("connect to %s (%s) from jump host %s: %w", t.Name, t.Address, t.Jump.Name, err)
		}
	} else {
		d := net.Dialer{Timeout: o.DialTimeout}
		if conn, err = d.DialContext(ctx, "tcp", t.Address); err != nil {
			return nil, fmt.Errorf("connect to %s (%s): %w", t.Name, t.Address, err)
		}
	}
	c, err := handshake(ctx, conn, t, o)
	if err != nil {
		conn.Close()
		if jump != nil {
			jump.Close()
		}
		return nil, err
	}
	c.jump, c.DialTime = jump, time.Since(began)
	c.start()
	o.Log.Debug("ssh connected", "host", t.Name, "address", t.Address, "in", c.DialTime.Round(time.Microsecond))
	return c, nil
}

// handshake runs the SSH handshake and authentication over conn, closing
// conn when it takes longer than the dial timeout or ctx ends.
func handshake(ctx context.Context, conn net.Conn, t *Target, o Options) (*Client, error) {
	hk, err := readKnownHosts(t)
	if err != nil {
		return nil, fmt.Errorf("host %s: %w", t.Name, err)
	}
	auth, closeAuth, err := authMethod(t, o)
	if err != nil {
		return nil, fmt.Errorf("host %s: %w", t.Name, err)
	}
	defer closeAuth()
	cfg := &ssh.ClientConfig{User: t.User, Auth: []ssh.AuthMethod{auth}, HostKeyCallback: hk.check,
		HostKeyAlgorithms: hk.algorithms, Timeout: o.DialTimeout}
	hctx, cancel := context.WithTimeout(ctx, o.DialTimeout)
	defer cancel()
	stop := context.AfterFunc(hctx, func() { conn.Close() })
	cc, chans, reqs, err := ssh.NewClientConn(conn, t.Address, cfg)
	if !stop() {
		if err == nil {
			cc.Close()
		}
		return nil, fmt.Errorf("ssh handshake with %s (%s): %w", t.Name, t.Address, context.Cause(hctx))
	}
	if err != nil {
		var he *HostKeyError
		if errors.As(err, &he) {
			return nil, he
		}
		return nil, fmt.Errorf("ssh handshake with %s (%s) as %s: %w", t.Name, t.Address, t.User, err)
	}
	return &Client{Target: t, HostKey: hk.offered, ssh: ssh.NewClient(cc, chans, reqs), opts: o, done: make(chan struct{})}, nil
}

// authMethod is the target's identity file, else the ssh-agent; the
// returned func closes the agent's socket once the handshake is over.
func authMethod(t *Target, o Options) (ssh.AuthMethod, func(), error) {
	if t.IdentityFile != "" {
		b, err := os.ReadFile(t.IdentityFile)
		if err != nil {
			return nil, nil, fmt.Errorf("identity_file: %w", err)
		}
		signer, err := ssh.ParsePrivateKey(b)
		var pm *ssh.PassphraseMissingError
		if errors.As(err, &pm) {
			return nil, nil, fmt.Errorf("identity_file %s has a passphrase: add it to the ssh-agent (ssh-add %s) and leave identity_file unset", t.IdentityFile, t.IdentityFile)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("identity_file %s: %w", t.IdentityFile, err)
		}
		return ssh.PublicKeys(signer), func() {}, nil
	}
	if o.AgentSocket == "" {
		return nil, nil, errors.New("no identity_file and no ssh-agent (SSH_AUTH_SOCK is not set)")
	}
	ac, err := net.Dial("unix", o.AgentSocket)
	if err != nil {
		return nil, nil, fmt.Errorf("ssh-agent at SSH_AUTH_SOCK: %w", err)
	}
	return ssh.PublicKeysCallback(agent.NewClient(ac).Signers), func() { ac.Close() }, nil
}

// start starts the keepalives and the watch of the connection's end.
func (c *Client) start() {
	c.wg.Add(2)
	go func() {
		defer c.wg.Done()
		err := c.ssh.Wait()
		if err == nil {
			err = io.EOF
		}
		c.lost(fmt.Errorf("connection to %s closed: %w", c.Target.Name, err))
	}()
	go func() {
		defer c.wg.Done()
		c.keepalive()
	}()
}

// keepalive sends a keepalive request every interval and closes the
// connection after KeepaliveMissed unanswered in a row.
func (c *Client) keepalive() {
	tick := time.NewTicker(c.opts.KeepaliveInterval)
	defer tick.Stop()
	answered := make(chan struct{}, 1)
	pending, missed := false, 0
	for {
		select {
		case <-c.done:
			return
		case <-answered:
			pending, missed = false, 0
		case <-tick.C:
			if pending {
				missed++
				if missed >= c.opts.KeepaliveMissed {
					c.lost(fmt.Errorf("connection to %s lost: %w (%d in a row, every %s)", c.Target.Name, ErrKeepalive, missed, c.opts.KeepaliveInterval))
					return
				}
				continue
			}
			pending = true
			c.wg.Add(1)
			go func() {
				defer c.wg.Done()
				// Any answer counts, OpenSSH's failure included; an error
				// is a closed connection, which Wait reports.
				if _, _, err := c.ssh.SendRequest("keepalive@openssh.com", true, nil); err == nil {
					select {
					case answered <- struct{}{}:
					default:
					}
				}
			}()
		}
	}
}

// track counts one more goroutine for Close to wait for, unless the
// connection has ended (Close may be waiting already).
func (c *Client) track() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return false
	}
	c.wg.Add(1)
	return true
}

// lost records why the connection ended (the first reason) and closes it.
func (c *Client) lost(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
	c.closeOnce.Do(func() {
		close(c.done)
		c.ssh.Close()
		if c.jump != nil {
			c.jump.Close()
		}
		c.opts.Log.Debug("ssh connection closed", "host", c.Target.Name, "err", err)
	})
}

// Done is closed when the connection has ended (closed, or lost).
func (c *Client) Done() <-chan struct{} { return c.done }

// Err says why the connection ended (nil while it is up).
func (c *Client) Err() error {
	select {
	case <-c.done:
	default:
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the connection (and the jump host's) and waits for its
// goroutines.
func (c *Client) Close() error {
	c.lost(errClosed)
	c.wg.Wait()
	return nil
}

var errClosed = errors.New("closed")

// Cmd is one remote command: a shell command line (quote its words with
// Quote), with what it reads and where its output goes.
type Cmd struct {
	Line           string
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Result is how a remote command ended.
type Result struct {
	// Status is the exit status (-1 when it was killed by a signal or
	// the server said nothing).
	Status int
	// Signal is the signal that killed it ("KILL"), if one did.
	Signal string
}

// Run runs cmd in a new session and waits for it. The error is about the
// session (it could not start, the connection was lost, ctx ended: the
// session is closed); a command that ran and failed is a nil error and a
// non-zero Result.
func (c *Client) Run(ctx context.Context, cmd Cmd) (Result, error) {
	s, err := c.ssh.NewSession()
	if err != nil {
		if e := c.Err(); e != nil {
			err = e
		}
		return Result{Status: -1}, fmt.Errorf("new session on %s: %w", c.Target.Name, err)
	}
	defer s.Close()
	s.Stdin, s.Stdout, s.Stderr = cmd.Stdin, cmd.Stdout, cmd.Stderr
	if err := s.Start(cmd.Line); err != nil {
		return Result{Status: -1}, fmt.Errorf("%s on %s: %w", cmd.Line, c.Target.Name, err)
	}
	// Wait returns when the server closes the channel, which OpenSSH does
	// only once the command has ended, whatever the client closed: on
	// ctx's end the command is signalled and the session closed, and
	// Wait is left to a goroutine the connection's Close waits for.
	waited := make(chan error, 1)
	if !c.track() {
		s.Close()
		return Result{Status: -1}, fmt.Errorf("%s on %s: %w", cmd.Line, c.Target.Name, c.Err())
	}
	go func() {
		defer c.wg.Done()
		waited <- s.Wait()
	}()
	select {
	case err = <-waited:
	case <-ctx.Done():
		s.Signal(ssh.SIGKILL)
		s.Close()
		return Result{Status: -1}, fmt.Errorf("%s on %s: %w", cmd.Line, c.Target.Name, context.Cause(ctx))
	}
	var ee *ssh.ExitError
	var em *ssh.ExitMissingError
	switch {
	case err == nil:
		return Result{}, nil
	case errors.As(err, &ee):
		if ee.Signal() != "" {
			return Result{Status: -1, Signal: ee.Signal()}, nil
		}
		return Result{Status: ee.ExitStatus()}, nil
	case errors.As(err, &em):
		if e := c.Err(); e != nil {
			err = e
		}
		return Result{Status: -1}, fmt.Errorf("%s on %s: no exit status: %w", cmd.Line, c.Target.Name, err)
	}
	return Result{Status: -1}, fmt.Errorf("%s on %s: %w", cmd.Line, c.Target.Name, err)
}
