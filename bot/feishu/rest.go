package feishu

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// The REST API as trainbot uses it: a self-built app's tenant token
// (POST /open-apis/auth/v3/tenant_access_token/internal with app_id and
// app_secret; it lasts "expire" seconds and is renewed 3 minutes early, as
// the SDK does), then calls with "Authorization: Bearer <token>" answered
// {code, msg, data}. An answer saying the token is invalid (99991663,
// 99991664, 99991671) drops it and the call is made once more with a new
// one, as the SDK does; anything else is one attempt.
const tokenPath = "/open-apis/auth/v3/tenant_access_token/internal"

// tokenEarly is how long before its expiry a tenant token is renewed.
const tokenEarly = 3 * time.Minute

// maxAnswer bounds a REST answer read.
const maxAnswer = 1 << 20

// throttleCodes are codes that mean "too many requests".
var throttleCodes = map[int]bool{99991400: true, 230020: true, 11232: true}

// tokenInvalid are the codes of an expired or revoked token.
var tokenInvalid = map[int]bool{99991663: true, 99991664: true, 99991671: true}

// rest makes Feishu's REST calls.
type rest struct {
	base, appID, appSecret string
	hc                     *http.Client
	throttlePause          time.Duration

	mu      sync.Mutex // held while a token is fetched: one fetch at a time
	token   string
	expires time.Time
}

// apiError is an answer with a non-zero code, or an HTTP error status.
type apiError struct {
	op     string
	status int
	code   int
	msg    string
	after  time.Duration // a throttle's pause
}

func (e *apiError) Error() string {
	return fmt.Sprintf("feishu %s: HTTP %d, code %d: %s", e.op, e.status, e.code, e.msg)
}

// answer is the envelope of every REST answer.
type answer struct {
	Code int             `json:"code"`
	Msg  string          `json:"msg"`
	Data json.RawMessage `json:"data"`
}

// call makes a REST call with the tenant token and decodes the answer's
// data into out (when not nil). body is sent as contentType.
func (r *rest) call(ctx context.Context, op, method, path, contentType string, body []byte, out any) error {
	for try := 0; ; try++ {
		token, err := r.tenantToken(ctx)
		if err != nil {
			return err
		}
		raw, status, hdr, err := r.do(ctx, method, path, contentType, body, token)
		if err != nil {
			return fmt.Errorf("feishu %s: %w", op, err)
		}
		var a answer
		jerr := json.Unmarshal(raw, &a)
		if jerr == nil && tokenInvalid[a.Code] && try == 0 {
			r.forget(token)
			continue
		}
		if err := r.check(op, status, hdr, a.Code, a.Msg); err != nil {
			return err
		}
		if jerr != nil {
			return fmt.Errorf("feishu %s: unreadable answer: %w", op, jerr)
		}
		if out != nil && len(a.Data) > 0 {
			if err := json.Unmarshal(a.Data, out); err != nil {
				return fmt.Errorf("feishu %s: unreadable answer: %w", op, err)
			}
		}
		return nil
	}
}

// do sends one request and reads its answer.
func (r *rest) do(ctx context.Context, method, path, contentType string, body []byte, token string) ([]byte, int, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, method, r.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, 0, nil, err
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("User-Agent", "trainbot")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, 0, nil, redactURL(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, 0, nil, redactURL(err)
	}
	return raw, resp.StatusCode, resp.Header, nil
}

// check turns an answer's status and code into an error.
func (r *rest) check(op string, status int, hdr http.Header, code int, msg string) error {
	if code == 0 && status/100 == 2 {
		return nil
	}
	e := &apiError{op: op, status: status, code: code, msg: msg}
	if status == http.StatusTooManyRequests || throttleCodes[code] {
		e.after = r.throttlePause
		if s, _ := strconv.Atoi(hdr.Get("Retry-After")); s > 0 {
			e.after = time.Duration(s) * time.Second
		}
	}
	return e
}

// tenantToken returns the tenant token, fetching one when there is none
// or it is about to expire.
func (r *rest) tenantToken(ctx context.Context) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.token != "" && time.Now().Before(r.expires) {
		return r.token, nil
	}
	const op = "get a tenant token"
	body, _ := json.Marshal(map[string]string{"app_id": r.appID, "app_secret": r.appSecret})
	raw, status, hdr, err := r.do(ctx, http.MethodPost, tokenPath, "application/json; charset=utf-8", body, "")
	if err != nil {
		return "", fmt.Errorf("feishu %s: %w", op, err)
	}
	var a struct {
		Code   int    `json:"code"`
		Msg    string `json:"msg"`
		Token  string `json:"tenant_access_token"`
		Expire int    `json:"expire"` // seconds
	}
	jerr := json.Unmarshal(raw, &a)
	if err := r.check(op, status, hdr, a.Code, a.Msg); err != nil {
		return "", err
	}
	if jerr != nil || a.Token == "" {
		return "", errors.New("feishu " + op + ": no token in the answer")
	}
	r.token, r.expires = a.Token, time.Now().Add(time.Duration(a.Expire)*time.Second-tokenEarly)
	return a.Token, nil
}

// forget drops a token Feishu called invalid (unless another call has
// already replaced it).
func (r *rest) forget(token string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.token == token {
		r.token = ""
	}
}
