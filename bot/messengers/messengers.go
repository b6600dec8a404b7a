// Package messengers is the list of the chat transports trainbot is built
// with. Adding one is its package (a transport.Kind with its config
// section, see bot/transport) and one line here.
package messengers

import (
	"github.com/trainbot/trainbot/bot/dingtalk"
	"github.com/trainbot/trainbot/bot/feishu"
	"github.com/trainbot/trainbot/bot/telegram"
	"github.com/trainbot/trainbot/bot/transport"
	"github.com/trainbot/trainbot/bot/wecom"
)

// All are the chat transports of `trainbot serve`, in the order `trainbot
// check` names them.
func All() []transport.Kind {
	return []transport.Kind{telegram.Kind, wecom.Kind, feishu.Kind, dingtalk.Kind}
}
