// Package transport is what a chat transport gives trainbot to be served:
// a Kind names it and declares its config section, whose values say
// whether it is on, what its chats speak and what its console must
// enable, and open the transport itself. Everything a transport needs —
// its [section] of the config, its [auth] lists (NAME_operators,
// NAME_viewers, for a config.MemberSection), its secrets from the file or
// the environment, its wiring into `trainbot serve` and `trainbot check` —
// comes from its own package through these types; the list of the kinds
// trainbot is built with is bot/messengers'.
//
// A Kind's transport is a chat.Receiver and a chat.Sender: it receives
// what users send and makes one attempt at each reply (bot/chat says how);
// bot/receivers keeps it receiving and bot/deliver owns its delivery.
package transport

import (
	"context"
	"log/slog"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/config"
	"github.com/trainbot/trainbot/i18n"
)

// Kind is one chat transport trainbot can serve.
type Kind struct {
	// Name is the transport's name: its [name] section, its [auth]
	// NAME_operators and NAME_viewers, the "name:" of its chat keys.
	Name string
	// Section returns a fresh [name] section holding its defaults, to
	// declare before the file is read (Declare).
	Section func() Section
	// Chinese says that its chats write Chinese unless [chat] language or
	// its own language key says otherwise (the messengers of teams in
	// mainland China); the others default to Chinese with English.
	Chinese bool
	// Enable says what turns it on, for the message of a trainbot with
	// nothing to serve; "" is "[name]".
	Enable string
}

// Enabling is k.Enable, or "[name]".
func (k Kind) Enabling() string {
	if k.Enable != "" {
		return k.Enable
	}
	return "[" + k.Name + "]"
}

// Section is a transport's config section.
type Section interface {
	config.Section
	// On reports whether the section turns the transport on (a token, an
	// app id).
	On() bool
	// Language is the section's language key ("" when unset): it
	// overrides [chat] language for this transport.
	Language() string
	// Setup says what the messenger's console must enable for trainbot to
	// work, printed by `trainbot check` when the section is on; "" when
	// nothing.
	Setup() string
	// Open makes the transport from the section's values.
	Open(Deps) (Transport, error)
}

// Deps is what a transport is opened with.
type Deps struct {
	// State keeps what the transport remembers across restarts (an
	// update offset, the ids of messages already answered).
	State KV
	// Logger logs the transport's connection events.
	Logger *slog.Logger
	// Lang is the language of its chats (of a command menu it sets).
	Lang i18n.Lang
}

// KV is a small persistent key-value store (trainbot.db's state table).
type KV interface {
	Get(ctx context.Context, key string) (string, bool, error)
	Set(ctx context.Context, key, value string) error
}

// Transport receives what users send and delivers replies.
type Transport interface {
	chat.Receiver
	chat.Sender
}

// Declare declares the sections of kinds in cfg, before its file is read.
func Declare(cfg *config.Config, kinds []Kind) {
	for _, k := range kinds {
		cfg.Declare(k.Name, k.Section())
	}
}

// SectionOf returns the declared section of kind in cfg, or nil.
func SectionOf(cfg *config.Config, kind string) Section {
	s, _ := cfg.Section(kind).(Section)
	return s
}
