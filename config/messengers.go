package config

import (
	"net/url"
	"regexp"
	"strings"
)

// WeComConfig is the [wecom] section: a WeCom 智能机器人 (AI bot) in API
// mode over its long connection, on when bot_id is set.
type WeComConfig struct {
	BotID string `toml:"bot_id"`
	// Secret is the bot's long-connection secret (not the webhook token);
	// SecretEnv names a variable that holds it.
	Secret    string `toml:"secret"`
	SecretEnv string `toml:"secret_env"`
	// URL is the WebSocket endpoint (wss://openws.work.weixin.qq.com).
	URL string `toml:"url"`
	// Language overrides [chat] language for WeCom (default "zh").
	Language string `toml:"language"`
}

// FeishuConfig is the [feishu] section: a Feishu/Lark enterprise
// self-built app's bot over the long connection, on when app_id is set.
type FeishuConfig struct {
	AppID        string `toml:"app_id"`
	AppSecret    string `toml:"app_secret"`
	AppSecretEnv string `toml:"app_secret_env"`
	// Domain is "feishu" (default), "lark" (Lark international), or a
	// base URL ("http://127.0.0.1:8080") for both the long connection's
	// discovery and the REST API.
	Domain string `toml:"domain"`
	// Language overrides [chat] language for Feishu (default "zh").
	Language string `toml:"language"`
}

// DingTalkConfig is the [dingtalk] section: an internal app's robot in
// Stream mode, on when client_id is set.
type DingTalkConfig struct {
	ClientID        string `toml:"client_id"`
	ClientSecret    string `toml:"client_secret"`
	ClientSecretEnv string `toml:"client_secret_env"`
	// RobotCode is the robot's code for pushes (usually the client_id,
	// the default).
	RobotCode string `toml:"robot_code"`
	// APIURL is the new OpenAPI and the stream's gateway
	// (https://api.dingtalk.com); OAPIURL the old one, for media uploads
	// (https://oapi.dingtalk.com).
	APIURL  string `toml:"api_url"`
	OAPIURL string `toml:"oapi_url"`
	// Language overrides [chat] language for DingTalk (default "zh").
	Language string `toml:"language"`
}

// Default endpoints of the messengers.
const (
	DefaultWeComURL        = "wss://openws.work.weixin.qq.com"
	DefaultDingTalkAPIURL  = "https://api.dingtalk.com"
	DefaultDingTalkOAPIURL = "https://oapi.dingtalk.com"
)

// messengerID is the shape of a messenger's user id in [auth]: letters,
// digits and a few marks, no spaces.
var messengerID = regexp.MustCompile(`^[A-Za-z0-9_.@$-]{1,128}$`)

// validateMessengers checks [wecom], [feishu], [dingtalk] and their
// [auth] lists, and reads the secrets from the environment. A secret is
// never repeated in a message.
func (c *Config) validateMessengers() Errors {
	var errs Errors
	secret := func(section, key string, value *string, envKey, env string) {
		if env == "" {
			return
		}
		if *value != "" {
			errs = append(errs, c.ErrorAt(section+"."+envKey, "give only one of %s, %s", key, envKey))
			return
		}
		v, ok := lookupEnv(env)
		if !ok || v == "" {
			errs = append(errs, c.ErrorAt(section+"."+envKey, "%s: the environment variable %s is not set", envKey, env))
			return
		}
		*value = v
	}
	need := func(on bool, section string, fields ...[2]string) {
		if !on {
			for _, f := range fields {
				if f[1] != "" {
					errs = append(errs, c.ErrorAt(section+"."+f[0], "%s is set but %s is not: [%s] needs both", f[0], fields[0][0], section))
					return
				}
			}
			return
		}
		for _, f := range fields {
			if f[1] == "" {
				errs = append(errs, c.ErrorAt(section, "[%s] needs %s", section, f[0]))
			}
		}
	}
	baseURL := func(key, v string, schemes ...string) {
		u, err := url.Parse(v)
		ok := err == nil && u.Host != ""
		if ok {
			ok = false
			for _, s := range schemes {
				ok = ok || u.Scheme == s
			}
		}
		if !ok {
			errs = append(errs, c.ErrorAt(key, "want a URL like %s://host, got %q", schemes[0], v))
		}
	}

	w := &c.WeCom
	w.BotID = strings.TrimSpace(w.BotID)
	secret("wecom", "secret", &w.Secret, "secret_env", w.SecretEnv)
	need(w.BotID != "", "wecom", [2]string{"bot_id", w.BotID}, [2]string{"secret", w.Secret})
	if w.URL == "" {
		w.URL = DefaultWeComURL
	}
	baseURL("wecom.url", w.URL, "wss", "ws")

	f := &c.Feishu
	f.AppID = strings.TrimSpace(f.AppID)
	secret("feishu", "app_secret", &f.AppSecret, "app_secret_env", f.AppSecretEnv)
	need(f.AppID != "", "feishu", [2]string{"app_id", f.AppID}, [2]string{"app_secret", f.AppSecret})
	if f.AppID != "" && !strings.HasPrefix(f.AppID, "cli_") {
		errs = append(errs, c.ErrorAt("feishu.app_id", "want the App ID of the app's credentials page, which starts with cli_, got %q", f.AppID))
	}
	switch f.Domain {
	case "", "feishu", "lark":
	default:
		baseURL("feishu.domain", f.Domain, "https", "http")
	}

	d := &c.DingTalk
	d.ClientID = strings.TrimSpace(d.ClientID)
	secret("dingtalk", "client_secret", &d.ClientSecret, "client_secret_env", d.ClientSecretEnv)
	need(d.ClientID != "", "dingtalk", [2]string{"client_id", d.ClientID}, [2]string{"client_secret", d.ClientSecret})
	if d.RobotCode == "" {
		d.RobotCode = d.ClientID
	}
	if d.APIURL == "" {
		d.APIURL = DefaultDingTalkAPIURL
	}
	if d.OAPIURL == "" {
		d.OAPIURL = DefaultDingTalkOAPIURL
	}
	baseURL("dingtalk.api_url", d.APIURL, "https", "http")
	baseURL("dingtalk.oapi_url", d.OAPIURL, "https", "http")
	d.APIURL, d.OAPIURL = strings.TrimRight(d.APIURL, "/"), strings.TrimRight(d.OAPIURL, "/")

	for key, ids := range map[string][]string{
		"auth.wecom_operators": c.Auth.WeComOperators, "auth.wecom_viewers": c.Auth.WeComViewers,
		"auth.feishu_operators": c.Auth.FeishuOperators, "auth.feishu_viewers": c.Auth.FeishuViewers,
		"auth.dingtalk_operators": c.Auth.DingTalkOperators, "auth.dingtalk_viewers": c.Auth.DingTalkViewers,
	} {
		for _, id := range ids {
			if !messengerID.MatchString(id) {
				errs = append(errs, c.ErrorAt(key, "%q is not a user id (the bot tells a stranger their id: a WeCom userid, a Feishu open_id ou_…, a DingTalk staffId)", id))
			}
		}
	}
	return errs
}

// Messengers returns the chat sections that are on, with what each needs
// enabled in the messenger's console: for `trainbot check`.
func (c *Config) Messengers() map[string]string {
	out := map[string]string{}
	if c.WeCom.BotID != "" {
		out["wecom"] = "WeCom admin → 应用管理 → 智能机器人: create the bot in API mode with 长连接 (long connection); bot_id and secret are on its page. Only one trainbot may use a bot_id at a time."
	}
	if c.Feishu.AppID != "" {
		out["feishu"] = "Feishu/Lark developer console → your enterprise self-built app: add the Bot capability; Events & callbacks → use long connection, add im.message.receive_v1 and the card.action.trigger callback; scopes im:message, im:message.group_at_msg:readonly, im:message.p2p_msg:readonly, im:resource; publish a version."
	}
	if c.DingTalk.ClientID != "" {
		out["dingtalk"] = "DingTalk developer console → your internal app: add the Robot capability with message receiving mode Stream; permissions qyapi_robot_sendmsg (robot sends messages) and the media upload; publish the app."
	}
	return out
}
