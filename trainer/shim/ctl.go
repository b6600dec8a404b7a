package shim

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trainbot/trainbot/trainer/shimctl"
)

const (
	connDeadline = 5 * time.Second // a stuck client cannot hold a handler longer
	maxRequest   = 64 << 10
	maxConns     = 16 // handlers at once (for the owner's and root's connections); more wait in the backlog
	refuseWrite  = 100 * time.Millisecond
)

// listen binds runDir's control socket with mode 0600, replacing a stale
// one.
func listen(runDir string) (*net.UnixListener, error) {
	path, done, err := shimctl.SocketAddr(runDir)
	if err != nil {
		return nil, err
	}
	defer done()
	// A socket that still answers is a live shim's: never removed.
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("%s answers: another supervisor serves this run directory", shimctl.SocketFile)
	} else if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("cannot tell whether %s is stale: %w", shimctl.SocketFile, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket: %w", err)
	}
	// Nothing else creates files yet (no child, no readers): the umask
	// makes the socket 0600 from its first instant.
	old := syscall.Umask(0o177)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", shimctl.SocketFile, err)
	}
	ln.SetUnlinkOnClose(false) // the name may be a /proc/self/fd path: removed by its real path
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod %s: %w", shimctl.SocketFile, err)
	}
	return ln, nil
}

// server answers requests on the control socket.
type server struct {
	ln     *net.UnixListener
	handle func(shimctl.Request, shimctl.Peer) shimctl.Response
	errf   func(msg string, err error)
	uid    int
	wg     sync.WaitGroup // the accept loop and the handlers
	sem    chan struct{}

	mu     sync.Mutex
	conns  map[*net.UnixConn]bool // being answered
	closed bool
}

func newServer(ln *net.UnixListener, handle func(shimctl.Request, shimctl.Peer) shimctl.Response, errf func(string, error)) *server {
	return &server{ln: ln, handle: handle, errf: errf, uid: os.Getuid(), sem: make(chan struct{}, maxConns), conns: map[*net.UnixConn]bool{}}
}

func (s *server) start() {
	s.wg.Add(1)
	go s.accept()
}

// close stops accepting, cuts short the clients still being answered
// (a silent one would otherwise hold the end for connDeadline) and waits
// for the handlers.
func (s *server) close() {
	s.ln.Close()
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.SetDeadline(time.Now())
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.errf("accept", err) // EMFILE and the like: pass, do not spin
			time.Sleep(100 * time.Millisecond)
			continue
		}
		// The peer is checked before it takes a handler: connections
		// from another user, however many and however idle, cost the
		// owner nothing.
		cred, err := peerCred(c)
		if err != nil || !s.allowed(cred) {
			s.refuse(c, cred, err)
			continue
		}
		s.sem <- struct{}{}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-s.sem }()
			s.serve(c, shimctl.Peer{PID: int(cred.Pid), UID: int(cred.Uid)})
		}()
	}
}

// allowed reports whether the peer cred may control the run: its owner
// and root.
func (s *server) allowed(cred *unix.Ucred) bool {
	return int(cred.Uid) == s.uid || cred.Uid == 0
}

// refuse answers a peer that may not control the run (or whose
// credentials could not be read, err) with one line that says why, and
// closes the connection. It reads nothing and takes no handler: the line
// fits in the empty socket buffer of a new connection, so the write does
// not wait (refuseWrite bounds it all the same).
func (s *server) refuse(c *net.UnixConn, cred *unix.Ucred, err error) {
	defer c.Close()
	resp := shimctl.Response{Error: "cannot check the caller: " + fmt.Sprint(err)}
	if err == nil {
		resp.Error = fmt.Sprintf("uid %d may not control this run (its owner is uid %d)", cred.Uid, s.uid)
	}
	b, _ := json.Marshal(resp)
	c.SetWriteDeadline(time.Now().Add(refuseWrite))
	c.Write(append(b, '\n'))
}

// serve answers one request on c, from peer.
func (s *server) serve(c *net.UnixConn, peer shimctl.Peer) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(connDeadline))
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.conns[c] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	resp := s.answer(c, peer)
	b, _ := json.Marshal(resp)
	c.Write(append(b, '\n'))
}

func (s *server) answer(c *net.UnixConn, peer shimctl.Peer) shimctl.Response {
	line, err := bufio.NewReader(io.LimitReader(c, maxRequest)).ReadBytes('\n')
	if len(line) == 0 {
		return shimctl.Response{Error: fmt.Sprintf("no request: %v", err)}
	}
	var req shimctl.Request
	if err := json.Unmarshal(line, &req); err != nil {
		return shimctl.Response{Error: "bad request: " + err.Error()}
	}
	return s.handle(req, peer)
}

// peerCred is the pid, uid and gid of the process at the other end of c
// (SO_PEERCRED: as it was when it connected).
func peerCred(c *net.UnixConn) (*unix.Ucred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	if credErr != nil {
		return nil, credErr
	}
	return cred, nil
}
