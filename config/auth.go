package config

// AuthConfig is the [auth] section: who may use the chat transports.
type AuthConfig struct {
	// Operators may start and stop runs (Telegram user ids).
	Operators []int64 `toml:"operators"`
	// Viewers may look (status, charts, logs) but not start or stop.
	Viewers []int64 `toml:"viewers"`
	// Chats, when set, limits the bot to these chat ids (Telegram's).
	Chats []int64 `toml:"chats"`
	// members are the users of the messengers whose ids are strings,
	// by section: NAME_operators and NAME_viewers of every declared
	// MemberSection (wecom_operators: WeCom userids; feishu_viewers:
	// Feishu open_ids ou_…; dingtalk_operators: DingTalk staffIds).
	// Config.Members reads them.
	members map[string]Members
}

// validateAuth checks [auth]: the ids are ids.
func (c *Config) validateAuth() Errors {
	var errs Errors
	for key, ids := range map[string][]int64{"auth.operators": c.Auth.Operators, "auth.viewers": c.Auth.Viewers} {
		for _, id := range ids {
			if id <= 0 {
				errs = append(errs, c.ErrorAt(key, "%d is not a user id (user ids are positive; the bot tells a stranger their id)", id))
			}
		}
	}
	for _, id := range c.Auth.Chats {
		if id == 0 {
			errs = append(errs, c.ErrorAt("auth.chats", "0 is not a chat id"))
		}
	}
	return errs
}
