package hosts

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// KnownLine is a known_hosts line that holds a key for a host.
type KnownLine struct {
	File        string
	Line        int
	Type        string // "ssh-ed25519"
	Fingerprint string // "SHA256:…"
}

// HostKeyError is a host key that is refused: unknown (Known is empty) or
// changed (Known are the known_hosts lines that no longer match).
type HostKeyError struct {
	// Host and Address are the target's name and "host:port".
	Host, Address string
	// KnownHosts is the file that was read.
	KnownHosts string
	// Type and Fingerprint are the key the server offered ("ssh-ed25519",
	// "SHA256:…").
	Type, Fingerprint string
	// Line is the known_hosts line that would accept the offered key.
	Line string
	// Known are the lines held for the host, for a changed key.
	Known []KnownLine
	// Revoked is set when the key is marked @revoked.
	Revoked bool
}

// Unknown reports whether the host has no key in known_hosts.
func (e *HostKeyError) Unknown() bool { return len(e.Known) == 0 && !e.Revoked }

// Keyscan is the command that adds the host's keys to the known_hosts
// file, to be run after the fingerprint has been checked.
func (e *HostKeyError) Keyscan() string {
	host, port, _ := net.SplitHostPort(e.Address)
	return fmt.Sprintf("ssh-keyscan -p %s %s >> %s", port, host, e.KnownHosts)
}

// Forget is the command that removes the host's lines from known_hosts.
func (e *HostKeyError) Forget() string {
	return fmt.Sprintf("ssh-keygen -R '%s' -f %s", knownhosts.Normalize(e.Address), e.KnownHosts)
}

func (e *HostKeyError) Error() string {
	switch {
	case e.Revoked:
		return fmt.Sprintf("host %s (%s) offers the revoked key %s %s (%s): refused", e.Host, e.Address, e.Type, e.Fingerprint, e.KnownHosts)
	case e.Unknown():
		return fmt.Sprintf("host %s (%s) is not in %s: it offers %s %s. Check that fingerprint on the host "+
			"(ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub), then accept it by adding this line to %s:\n%s\n(or run: %s)",
			e.Host, e.Address, e.KnownHosts, e.Type, e.Fingerprint, e.KnownHosts, e.Line, e.Keyscan())
	}
	var lines []string
	for _, k := range e.Known {
		lines = append(lines, fmt.Sprintf("%s:%d (%s %s)", k.File, k.Line, k.Type, k.Fingerprint))
	}
	return fmt.Sprintf("host key of %s (%s) has CHANGED: it offers %s %s, which does not match %s. Someone may be "+
		"intercepting the connection; if the host was reinstalled, check the new fingerprint on it, remove the old line (%s) and accept the new key",
		e.Host, e.Address, e.Type, e.Fingerprint, strings.Join(lines, ", "), e.Forget())
}

// hostKeys is the host-key check of one target.
type hostKeys struct {
	check ssh.HostKeyCallback
	// algorithms are the host key algorithms of the keys known_hosts
	// holds for the target (nil: any).
	algorithms []string
	// offered is the key the server offered, once it has.
	offered ssh.PublicKey
}

// readKnownHosts reads a target's known_hosts (a missing file is an empty
// one) and finds which key types it holds for the target.
func readKnownHosts(t *Target) (*hostKeys, error) {
	var files []string
	switch _, err := os.Stat(t.KnownHosts); {
	case err == nil:
		files = append(files, t.KnownHosts)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("known_hosts: %w", err)
	}
	cb, err := knownhosts.New(files...)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", t.KnownHosts, err)
	}
	hk := &hostKeys{}
	// Ask with a key no host has: the KeyError lists what is known.
	pub, _, _ := ed25519.GenerateKey(nil)
	probe, _ := ssh.NewPublicKey(pub)
	var ke *knownhosts.KeyError
	if err := cb(t.Address, probeAddr, probe); errors.As(err, &ke) {
		for _, k := range ke.Want {
			hk.algorithms = appendAlgorithms(hk.algorithms, k.Key.Type())
		}
	}
	hk.check = func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		hk.offered = key
		err := cb(hostname, remote, key)
		if err == nil {
			return nil
		}
		he := &HostKeyError{Host: t.Name, Address: t.Address, KnownHosts: t.KnownHosts, Type: key.Type(),
			Fingerprint: ssh.FingerprintSHA256(key), Line: knownhosts.Line([]string{t.Address}, key)}
		var re *knownhosts.RevokedError
		switch {
		case errors.As(err, &ke):
			for _, k := range ke.Want {
				he.Known = append(he.Known, KnownLine{File: k.Filename, Line: k.Line, Type: k.Key.Type(), Fingerprint: ssh.FingerprintSHA256(k.Key)})
			}
		case errors.As(err, &re):
			he.Revoked = true
		default:
			return err
		}
		return he
	}
	return hk, nil
}

// probeAddr is a remote address for the probe (knownhosts parses it).
var probeAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 22}

// appendAlgorithms adds the host key algorithms that sign with a key of
// type typ.
func appendAlgorithms(algs []string, typ string) []string {
	add := []string{typ}
	if typ == ssh.KeyAlgoRSA {
		add = []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	for _, a := range add {
		found := false
		for _, b := range algs {
			found = found || a == b
		}
		if !found {
			algs = append(algs, a)
		}
	}
	return algs
}
