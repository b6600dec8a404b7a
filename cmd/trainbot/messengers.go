package main

import (
	"log/slog"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/command"
	"github.com/trainbot/trainbot/bot/dingtalk"
	"github.com/trainbot/trainbot/bot/feishu"
	"github.com/trainbot/trainbot/bot/inbound"
	"github.com/trainbot/trainbot/bot/wecom"
	"github.com/trainbot/trainbot/config"
)

// accessFromConfig is [auth] as the router reads it.
func accessFromConfig(a config.AuthConfig) command.Access {
	access := command.Access{Operators: a.Operators, Viewers: a.Viewers, Chats: a.Chats, Members: map[string]map[string]command.Role{}}
	add := func(transport string, ids []string, role command.Role) {
		if len(ids) == 0 {
			return
		}
		if access.Members[transport] == nil {
			access.Members[transport] = map[string]command.Role{}
		}
		for _, id := range ids {
			access.Members[transport][id] = max(access.Members[transport][id], role)
		}
	}
	add(wecom.Name, a.WeComViewers, command.RoleViewer)
	add(wecom.Name, a.WeComOperators, command.RoleOperator)
	add(feishu.Name, a.FeishuViewers, command.RoleViewer)
	add(feishu.Name, a.FeishuOperators, command.RoleOperator)
	add(dingtalk.Name, a.DingTalkViewers, command.RoleViewer)
	add(dingtalk.Name, a.DingTalkOperators, command.RoleOperator)
	return access
}

// messenger is a two-way transport of a messenger section.
type messenger interface {
	chat.Receiver
	chat.Sender
}

// messengers makes the transports of the sections that are on ([wecom],
// [feishu], [dingtalk]); state keeps what they remember across restarts.
func messengers(cfg *config.Config, state inbound.KV, logger *slog.Logger) ([]messenger, error) {
	var out []messenger
	if w := cfg.WeCom; w.BotID != "" {
		tr, err := wecom.New(wecom.Options{BotID: w.BotID, Secret: w.Secret, URL: w.URL, State: state, Logger: logger})
		if err != nil {
			return nil, err
		}
		out = append(out, tr)
	}
	if f := cfg.Feishu; f.AppID != "" {
		tr, err := feishu.New(feishu.Options{AppID: f.AppID, AppSecret: f.AppSecret, Domain: f.Domain, State: state, Logger: logger})
		if err != nil {
			return nil, err
		}
		out = append(out, tr)
	}
	if d := cfg.DingTalk; d.ClientID != "" {
		tr, err := dingtalk.New(dingtalk.Options{ClientID: d.ClientID, ClientSecret: d.ClientSecret, RobotCode: d.RobotCode,
			APIURL: d.APIURL, OAPIURL: d.OAPIURL, State: state, Logger: logger})
		if err != nil {
			return nil, err
		}
		out = append(out, tr)
	}
	return out, nil
}
