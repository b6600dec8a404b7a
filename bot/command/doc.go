// Package command answers what users type: the Router authorises the
// sender (Access: operators, viewers, strangers; every attempt audited),
// parses the command word (chat.Parse, Chinese or English) and runs it
// against the supervisor, the history and the charts, returning one
// chat.Reply. It sends nothing itself: bot/deliver takes the answer to the
// chat it came from.
package command
