package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// KeyFile is the file in the data directory that holds the key the page
// links are signed with. Deleting it (and restarting) revokes every link.
const KeyFile = "web.key"

// keySize is the length of the signing key in bytes.
const keySize = 32

// Token errors: what a 401 page says.
var (
	ErrNoToken      = errors.New("no token")
	ErrBadToken     = errors.New("the token is not one trainbot signed")
	ErrExpiredToken = errors.New("the token has expired")
	ErrOtherScope   = errors.New("the token is for another page")
)

// Scope is what a token opens: one run (its id) or, with 0, the list of
// runs and every run in it.
type Scope int64

// ScopeList opens the runs list and every run.
const ScopeList Scope = 0

// Allows says whether a token of this scope opens run id (0: the list).
func (s Scope) Allows(run int64) bool { return s == ScopeList || int64(s) == run }

func (s Scope) String() string {
	if s == ScopeList {
		return "all"
	}
	return "r" + strconv.FormatInt(int64(s), 10)
}

// Signer signs and checks page tokens with an HMAC-SHA256 key. A token is
// "SCOPE.EXPIRY.MAC": the scope ("all" or "r12"), the expiry in Unix
// seconds, and the base64url MAC of both; nothing in it is secret, and
// nothing in it can be changed without the key.
type Signer struct {
	key []byte
}

// NewSigner returns a signer over key (at least 16 bytes).
func NewSigner(key []byte) (*Signer, error) {
	if len(key) < 16 {
		return nil, fmt.Errorf("web key: %d bytes, want at least 16", len(key))
	}
	return &Signer{key: append([]byte(nil), key...)}, nil
}

// LoadKey returns the signer of the key in dir/web.key, creating the file
// (0600, 32 random bytes) when there is none. A key file every user may
// read is refused: anyone who reads it can open every page. (A group may:
// a data directory given to a group, [store] shared_group, makes its
// files 0640, and the group reads the history anyway.)
func LoadKey(dir string) (*Signer, error) {
	path := filepath.Join(dir, KeyFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		b = make([]byte, keySize)
		if _, err := rand.Read(b); err != nil {
			return nil, fmt.Errorf("web key: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) { // another trainbot made it first
			return LoadKey(dir)
		}
		if err != nil {
			return nil, fmt.Errorf("web key: %w", err)
		}
		_, err = f.Write(b)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
			return nil, fmt.Errorf("web key %s: %w", path, err)
		}
		return NewSigner(b)
	}
	if err != nil {
		return nil, fmt.Errorf("web key: %w", err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o007 != 0 {
		return nil, fmt.Errorf("web key %s is readable by every user (mode %04o): chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	return NewSigner(b)
}

// Sign returns a token of the scope valid until expires.
func (s *Signer) Sign(scope Scope, expires time.Time) string {
	body := scope.String() + "." + strconv.FormatInt(expires.Unix(), 10)
	return body + "." + s.mac(body)
}

func (s *Signer) mac(body string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(body))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Verify returns the scope of a token signed with the key and not expired
// at now.
func (s *Signer) Verify(token string, now time.Time) (Scope, error) {
	if token == "" {
		return 0, ErrNoToken
	}
	i := strings.LastIndexByte(token, '.')
	if i < 0 || !hmac.Equal([]byte(token[i+1:]), []byte(s.mac(token[:i]))) {
		return 0, ErrBadToken
	}
	scope, exp, ok := strings.Cut(token[:i], ".")
	if !ok {
		return 0, ErrBadToken
	}
	e, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		return 0, ErrBadToken
	}
	if !now.Before(time.Unix(e, 0)) {
		return 0, ErrExpiredToken
	}
	if scope == "all" {
		return ScopeList, nil
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(scope, "r"), 10, 64)
	if err != nil || id <= 0 || !strings.HasPrefix(scope, "r") {
		return 0, ErrBadToken
	}
	return Scope(id), nil
}

// Links makes the addresses of the pages that chat messages and `trainbot
// link` hand out: Base ([http] public_url) with a token that expires TTL
// ([http] link_ttl) from now.
type Links struct {
	Base   string
	Signer *Signer
	TTL    time.Duration
	Now    func() time.Time // nil: time.Now
}

func (l *Links) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

// Run is the address of a run's page; "" when l is nil or has no Base.
func (l *Links) Run(id int64) string {
	if l == nil || l.Base == "" {
		return ""
	}
	return strings.TrimRight(l.Base, "/") + "/runs/" + strconv.FormatInt(id, 10) + "?t=" + l.Signer.Sign(Scope(id), l.now().Add(l.TTL))
}

// List is the address of the runs list; "" when l is nil or has no Base.
func (l *Links) List() string {
	if l == nil || l.Base == "" {
		return ""
	}
	return strings.TrimRight(l.Base, "/") + "/?t=" + l.Signer.Sign(ScopeList, l.now().Add(l.TTL))
}
