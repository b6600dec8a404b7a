package history

import "time"

// AuditEntry is one command somebody sent, allowed or not.
type AuditEntry struct {
	ID        int64
	T         time.Time
	Transport string // the messenger: telegram, console…
	Chat      int64
	User      int64
	UserName  string
	Text      string
	Command   string // canonical command name, "" when not a command
	Allowed   bool
	Reason    string // why it was refused
	Run       int64  // the run it touched (started, stopped, looked at); 0: none
}

// AuditFilter selects audit entries.
type AuditFilter struct {
	Limit int    // newest first; 0: 100
	User  *int64 // only this user's; nil: everyone's
}

// Subscription says whether a chat wants progress pushes.
type Subscription struct {
	Transport  string
	Chat       int64
	Subscribed bool
}
