package shimctl

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// maxSocketPath is the longest path a unix socket address holds (108 bytes
// of sun_path with the terminating NUL).
const maxSocketPath = 107

// SocketAddr returns the address of runDir's control socket. A path too
// long for a socket address goes through /proc/self/fd/N/ctl.sock, where N
// is dir, a descriptor of the run directory that the caller closes (with
// done) once it has bound or connected.
func SocketAddr(runDir string) (path string, done func(), err error) {
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
	path, done, err := SocketAddr(runDir)
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
