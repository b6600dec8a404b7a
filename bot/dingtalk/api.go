package dingtalk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
)

// maxAnswer bounds what is read of an answer.
const maxAnswer = 1 << 20

// api is DingTalk's REST side: the stream gateway, access tokens, robot
// sends and media uploads.
type api struct {
	opts   *Options
	client *http.Client

	mu      sync.Mutex
	token   string
	expires time.Time
}

// throttleCodes are errcodes that mean "too many messages".
var throttleCodes = map[int]bool{130101: true, 410100: true}

// apiError is a failed call: its HTTP status and what DingTalk said.
type apiError struct {
	op     string
	status int
	code   string // new API's code, or the old errcode as text
	msg    string
	after  time.Duration // asked-for wait, or the throttle pause
}

func (e *apiError) Error() string {
	s := fmt.Sprintf("dingtalk %s: HTTP %d", e.op, e.status)
	if e.code != "" {
		s += " " + e.code
	}
	if e.msg != "" {
		s += ": " + e.msg
	}
	return s
}

// do POSTs body (JSON, or a ready request body with its content type) and
// decodes the answer into out. A non-2xx status is an *apiError; so is an
// old-API errcode that is not 0.
func (a *api) do(ctx context.Context, op, u, contentType string, body []byte, header map[string]string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("dingtalk %s: %w", op, err)
	}
	req.Header.Set("Content-Type", contentType)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("dingtalk %s: %w", op, redactURL(err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("dingtalk %s: read the answer: %w", op, err)
	}
	var res struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		ErrCode *int   `json:"errcode"`
		ErrMsg  string `json:"errmsg"`
	}
	_ = json.Unmarshal(raw, &res)
	if resp.StatusCode/100 != 2 {
		e := &apiError{op: op, status: resp.StatusCode, code: res.Code, msg: res.Message}
		if e.msg == "" && res.ErrMsg != "" {
			e.msg = res.ErrMsg
		}
		if resp.StatusCode == http.StatusTooManyRequests || strings.Contains(res.Code, "Throttl") {
			e.after = a.opts.ThrottlePause
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
				e.after = time.Duration(s) * time.Second
			}
		}
		return e
	}
	if res.ErrCode != nil && *res.ErrCode != 0 {
		e := &apiError{op: op, status: resp.StatusCode, code: "errcode " + strconv.Itoa(*res.ErrCode), msg: res.ErrMsg}
		if throttleCodes[*res.ErrCode] {
			e.after = a.opts.ThrottlePause
		}
		return e
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("dingtalk %s: unreadable answer: %w", op, err)
		}
	}
	return nil
}

func (a *api) postJSON(ctx context.Context, op, u string, in any, header map[string]string, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return a.do(ctx, op, u, "application/json", body, header, out)
}

// open asks the gateway for a stream endpoint and returns it with its
// one-time ticket. Refused credentials are permanent.
func (a *api) open(ctx context.Context) (string, error) {
	in := map[string]any{
		"clientId": a.opts.ClientID, "clientSecret": a.opts.ClientSecret, "ua": "trainbot", "localIp": "",
		"subscriptions": []map[string]string{{"type": "EVENT", "topic": "*"}, {"type": "CALLBACK", "topic": topicBot}},
	}
	var out struct {
		Endpoint string `json:"endpoint"`
		Ticket   string `json:"ticket"`
	}
	if err := a.postJSON(ctx, "open the stream", a.opts.APIURL+"/v1.0/gateway/connections/open", in, nil, &out); err != nil {
		return "", credentialError(err)
	}
	if out.Endpoint == "" || out.Ticket == "" {
		return "", errors.New("dingtalk open the stream: no endpoint or ticket in the answer")
	}
	sep := "?"
	if strings.Contains(out.Endpoint, "?") {
		sep = "&"
	}
	return out.Endpoint + sep + "ticket=" + url.QueryEscape(out.Ticket), nil
}

// credentialError makes a refusal of the credentials permanent, and a
// throttling answer a retry-after.
func credentialError(err error) error {
	var ae *apiError
	if errors.As(err, &ae) {
		switch {
		case ae.status == 401 || ae.status == 403 || (ae.status == 400 && strings.Contains(strings.ToLower(ae.code), "invalid")):
			return chat.Permanent("DingTalk refused the client_id or client_secret", fmt.Errorf("%w: check [dingtalk] client_id and client_secret", err))
		case ae.after > 0:
			return chat.RetryAfter(ae.after, "DingTalk is throttling", err)
		}
	}
	return err
}

// accessToken returns a valid access token, fetching one when needed.
func (a *api) accessToken(ctx context.Context) (string, error) {
	a.mu.Lock()
	tok, exp := a.token, a.expires
	a.mu.Unlock()
	if tok != "" && time.Until(exp) > 5*time.Minute {
		return tok, nil
	}
	var out struct {
		AccessToken string `json:"accessToken"`
		ExpireIn    int64  `json:"expireIn"`
	}
	if err := a.postJSON(ctx, "get an access token", a.opts.APIURL+"/v1.0/oauth2/accessToken",
		map[string]string{"appKey": a.opts.ClientID, "appSecret": a.opts.ClientSecret}, nil, &out); err != nil {
		return "", credentialError(err)
	}
	if out.AccessToken == "" {
		return "", errors.New("dingtalk get an access token: none in the answer")
	}
	a.mu.Lock()
	a.token, a.expires = out.AccessToken, time.Now().Add(time.Duration(out.ExpireIn)*time.Second)
	a.mu.Unlock()
	return out.AccessToken, nil
}

// dropToken forgets a token the API refused.
func (a *api) dropToken() {
	a.mu.Lock()
	a.token = ""
	a.mu.Unlock()
}

// robot sends a message through the robot OpenAPI: to a user (ref
// "u:staffId") or a group ("g:conversationId").
func (a *api) robot(ctx context.Context, ref, msgKey string, param any) error {
	tok, err := a.accessToken(ctx)
	if err != nil {
		return err
	}
	p, _ := json.Marshal(param)
	in := map[string]any{"robotCode": a.opts.RobotCode, "msgKey": msgKey, "msgParam": string(p)}
	u := a.opts.APIURL + "/v1.0/robot/oToMessages/batchSend"
	kind, id, _ := strings.Cut(ref, ":")
	if kind == "g" {
		in["openConversationId"] = id
		u = a.opts.APIURL + "/v1.0/robot/groupMessages/send"
	} else {
		in["userIds"] = []string{id}
	}
	err = a.postJSON(ctx, "send "+msgKey, u, in, map[string]string{"x-acs-dingtalk-access-token": tok}, nil)
	var ae *apiError
	if errors.As(err, &ae) && ae.status == 401 {
		a.dropToken()
	}
	return err
}

// upload sends an image to media/upload and returns its media_id.
func (a *api) upload(ctx context.Context, name string, data []byte) (string, error) {
	tok, err := a.accessToken(ctx)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	fw, err := mw.CreateFormFile("media", name)
	if err != nil {
		return "", err
	}
	_, _ = fw.Write(data)
	if err := mw.Close(); err != nil {
		return "", err
	}
	u := a.opts.OAPIURL + "/media/upload?type=image&access_token=" + url.QueryEscape(tok)
	var out struct {
		MediaID string `json:"media_id"`
	}
	if err := a.do(ctx, "upload a chart", u, mw.FormDataContentType(), b.Bytes(), nil, &out); err != nil {
		return "", err
	}
	if out.MediaID == "" {
		return "", errors.New("dingtalk upload a chart: no media_id in the answer")
	}
	return out.MediaID, nil
}

// redactURL keeps the URL of a transport error (with a ticket, an access
// token or a session key in it) out of the message.
func redactURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}
