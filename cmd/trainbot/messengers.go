package main

import (
	"log/slog"
	"strings"

	"github.com/trainbot/trainbot/bot/command"
	"github.com/trainbot/trainbot/bot/messengers"
	"github.com/trainbot/trainbot/bot/transport"
	"github.com/trainbot/trainbot/config"
	"github.com/trainbot/trainbot/i18n"
)

// transports are the chat transports trainbot serves (bot/messengers'
// list): their sections are declared in every config read, and serve
// opens those that are on. A test adds one to it.
var transports = messengers.All()

// declareTransports declares the transports' sections in cfg.
func declareTransports(cfg *config.Config) { transport.Declare(cfg, transports) }

// accessFromConfig is [auth] as the router reads it: the Telegram ids,
// and the members each messenger's section declares.
func accessFromConfig(cfg *config.Config) command.Access {
	a := cfg.Auth
	access := command.Access{Operators: a.Operators, Viewers: a.Viewers, Chats: a.Chats, Members: map[string]map[string]command.Role{}}
	for _, k := range transports {
		m := cfg.Members(k.Name)
		for _, l := range []struct {
			ids  []string
			role command.Role
		}{{m.Viewers, command.RoleViewer}, {m.Operators, command.RoleOperator}} {
			for _, id := range l.ids {
				if access.Members[k.Name] == nil {
					access.Members[k.Name] = map[string]command.Role{}
				}
				access.Members[k.Name][id] = max(access.Members[k.Name][id], l.role)
			}
		}
	}
	return access
}

// openTransports opens the transports whose sections are on, in the
// order of transports; state keeps what they remember across restarts.
// A transport whose [auth] lets no one in is logged.
func openTransports(cfg *config.Config, access command.Access, state transport.KV, langs i18n.Languages, logger *slog.Logger) ([]transport.Transport, error) {
	var out []transport.Transport
	for _, k := range transports {
		s := transport.SectionOf(cfg, k.Name)
		if s == nil || !s.On() {
			continue
		}
		t, err := s.Open(transport.Deps{State: state, Logger: logger, Lang: langs.For(k.Name)})
		if err != nil {
			return nil, err
		}
		out = append(out, t)
		if _, members := cfg.Section(k.Name).(config.MemberSection); !members {
			// Telegram's users are [auth] operators and viewers.
			if len(access.Operators)+len(access.Viewers) == 0 {
				logger.Warn("[auth] has no operators or viewers: everyone is refused; send the bot a message to learn your user id")
			}
		} else if len(access.Members[k.Name]) == 0 {
			logger.Warn("[auth] has no "+k.Name+"_operators or "+k.Name+"_viewers: everyone is refused there; send the bot a message to learn your user id", "transport", k.Name)
		}
	}
	return out, nil
}

// confirmStops are the transports whose 停止 asks first with a button:
// all of them (the terminal has none).
func confirmStops() map[string]bool {
	out := map[string]bool{}
	for _, k := range transports {
		out[k.Name] = true
	}
	return out
}

// nothingToServe is the error of a serve with no transport, push channel
// or terminal.
func nothingToServe() string {
	var on []string
	for _, k := range transports {
		on = append(on, k.Enabling())
	}
	on = append(on, "[console] enabled = true")
	return "nothing to serve: set " + strings.Join(on, ", ") + ", or a [[push]] channel"
}

// served reports whether the transport named is on in cfg.
func served(cfg *config.Config, name string) bool {
	s := transport.SectionOf(cfg, name)
	return s != nil && s.On()
}
