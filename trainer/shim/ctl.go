package shim

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const (
	connDeadline = 5 * time.Second // a stuck client cannot hold a handler longer
	maxRequest   = 64 << 10
	maxConns     = 16 // handlers at once (for the owner's and root's connections); more wait in the backlog
	refuseWrite  = 100 * time.Millisecond
)

// maxSocketPath is the longest path a unix socket address holds (108 bytes
// of sun_path with the terminating NUL).
const maxSocketPath = 107

// socketPath returns the address of runDir's control socket. A path too
// long for a socket address goes through /proc/self/fd/N/ctl.sock, where N
// is dir, a descriptor of the run directory that the caller closes (with
// done) once it has bound or connected.
func socketPath(runDir string) (path string, done func(), err error) {
	path = filepath.Join(runDir, SocketFile)
	if len(path) <= maxSocketPath {
		return path, func() {}, nil
	}
	fd, err := unix.Open(runDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, fmt.Errorf("open run directory: %w", err)
	}
	return "/proc/self/fd/" + strconv.Itoa(fd) + "/" + SocketFile, func() { unix.Close(fd) }, nil
}

// Dial connects to the control socket of the run in runDir.
func Dial(runDir string, timeout time.Duration) (net.Conn, error) {
	path, done, err := socketPath(runDir)
	if err != nil {
		return nil, err
	}
	defer done()
	return net.DialTimeout("unix", path, timeout)
}

// Call sends one request to the shim of the run in runDir and returns its
// answer. A shim that refuses (Response.OK false) is an error too, returned
// with the response.
func Call(runDir string, req Request, timeout time.Duration) (Response, error) {
	c, err := Dial(runDir, timeout)
	if err != nil {
		return Response{}, fmt.Errorf("%s: %w", req.Op, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	b, err := json.Marshal(req)
	if err != nil {
		return Response{}, err
	}
	// A shim that refuses the caller answers and closes without reading,
	// so the write may fail (broken pipe) where the answer that says why
	// is already there to read.
	_, werr := c.Write(append(b, '\n'))
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if len(line) == 0 && werr != nil {
		return Response{}, fmt.Errorf("%s: %w", req.Op, werr)
	}
	if err != nil && len(line) == 0 {
		return Response{}, fmt.Errorf("%s: no answer: %w", req.Op, err)
	}
	var resp Response
	if err := json.Unmarshal(line, &resp); err != nil {
		return Response{}, fmt.Errorf("%s: bad answer: %w", req.Op, err)
	}
	if !resp.OK {
		return resp, fmt.Errorf("%s: %s", req.Op, resp.Error)
	}
	return resp, nil
}

// listen binds runDir's control socket with mode 0600, replacing a stale
// one.
func listen(runDir string) (*net.UnixListener, error) {
	path, done, err := socketPath(runDir)
	if err != nil {
		return nil, err
	}
	defer done()
	// A socket that still answers is a live shim's: never removed.
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("%s answers: another supervisor serves this run directory", SocketFile)
	} else if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("cannot tell whether %s is stale: %w", SocketFile, err)
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
		return nil, fmt.Errorf("listen on %s: %w", SocketFile, err)
	}
	ln.SetUnlinkOnClose(false) // the name may be a /proc/self/fd path: removed by its real path
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod %s: %w", SocketFile, err)
	}
	return ln, nil
}

// server answers requests on the control socket.
type server struct {
	ln     *net.UnixListener
	handle func(Request, Peer) Response
	errf   func(msg string, err error)
	uid    int
	wg     sync.WaitGroup // the accept loop and the handlers
	sem    chan struct{}

	mu     sync.Mutex
	conns  map[*net.UnixConn]bool // being answered
	closed bool
}

func newServer(ln *net.UnixListener, handle func(Request, Peer) Response, errf func(string, error)) *server {
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
			s.serve(c, Peer{PID: int(cred.Pid), UID: int(cred.Uid)})
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
	resp := Response{Error: "cannot check the caller: " + fmt.Sprint(err)}
	if err == nil {
		resp.Error = fmt.Sprintf("uid %d may not control this run (its owner is uid %d)", cred.Uid, s.uid)
	}
	b, _ := json.Marshal(resp)
	c.SetWriteDeadline(time.Now().Add(refuseWrite))
	c.Write(append(b, '\n'))
}

// serve answers one request on c, from peer.
func (s *server) serve(c *net.UnixConn, peer Peer) {
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

func (s *server) answer(c *net.UnixConn, peer Peer) Response {
	line, err := bufio.NewReader(io.LimitReader(c, maxRequest)).ReadBytes('\n')
	if len(line) == 0 {
		return Response{Error: fmt.Sprintf("no request: %v", err)}
	}
	var req Request
	if err := json.Unmarshal(line, &req); err != nil {
		return Response{Error: "bad request: " + err.Error()}
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
