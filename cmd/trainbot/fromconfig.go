package main

import (
	"errors"
	"fmt"
	"net"
	"net/mail"
	"slices"
	"strings"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/deliver"
	"github.com/trainbot/trainbot/bot/push"
	"github.com/trainbot/trainbot/config"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/internal/private"
	"github.com/trainbot/trainbot/schedule"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/logparse"
	"github.com/trainbot/trainbot/trainer/slurm"
)

// botConfig is the config turned into each package's options, as
// litestream's NewDBFromConfig does: cmd/trainbot is the one place that
// knows both the config's shape and what each package wants, so config
// imports no package of trainbot and no package reads the config.
type botConfig struct {
	jobs     []*trainer.Job
	channels []pushChannel
	// quiet are the quiet hours of the [[quiet]] chats (push channels
	// have theirs in pushChannel).
	quiet     map[chat.ChatKey]deliver.QuietHours
	schedules []scheduleEntry
	alerts    []trainer.AlertRule // [[alerts]]: every job's
	// sharing is [store] shared_group resolved; configPath the file read
	// ("" for none), whose mode is checked when it holds a secret.
	sharing    private.Sharing
	configPath string
	// langs is the language of each transport and push channel.
	langs i18n.Languages
}

// pushChannel is a [[push]] entry: the channel to make, and what it wants.
type pushChannel struct {
	opts     push.Options // holds the URL and the secret: never print it
	alerts   []string     // nil: all kinds
	progress bool
	quiet    deliver.QuietHours
}

// scheduleEntry is a [[schedules]] entry.
type scheduleEntry struct {
	Name, Spec, Action, Job string
	Params                  map[string]string
}

// fromConfig converts a config. Its errors, like config.Validate's, name
// the key and its line; a job or schedule that config.Validate found fault
// with (invalid) is not looked at again, so each problem is told once.
func fromConfig(c *config.Config, invalid config.Errors) (*botConfig, config.Errors) {
	// What config.Validate found fault with: each key of its errors, and
	// the key cut before each '.' or ' ' ("jobs[3].params.lr" gives
	// "jobs[3]" and "jobs[3].params"), so that an entry is one lookup,
	// not a scan of every error (quadratic in the jobs: 10,000 with an
	// error each took 5 s).
	faulted := map[string]bool{}
	for _, e := range invalid {
		for i := range len(e.Key) {
			if e.Key[i] == '.' || e.Key[i] == ' ' {
				faulted[e.Key[:i]] = true
			}
		}
		faulted[e.Key] = true
	}
	bad := func(prefix string) bool { return faulted[prefix] }
	out := &botConfig{quiet: map[chat.ChatKey]deliver.QuietHours{}}
	var errs config.Errors
	jobs := map[int]*trainer.Job{}
	for i := range c.Jobs {
		j, jerrs := jobFromConfig(c, i, bad(fmt.Sprintf("jobs[%d]", i)))
		errs = append(errs, jerrs...)
		if len(jerrs) == 0 {
			jobs[i] = j
			out.jobs = append(out.jobs, j)
		}
	}
	for i := range c.Push {
		ch, perrs := pushFromConfig(c, i)
		errs = append(errs, perrs...)
		out.channels = append(out.channels, ch)
	}
	for i, q := range c.Quiet {
		k, ok := chat.ParseChatKey(q.Chat)
		if !ok || k.Transport == "" || fmt.Sprint(k.Chat) != q.Chat[strings.LastIndexByte(q.Chat, ':')+1:] {
			errs = append(errs, c.EntryErrorAt("quiet", i, q.Chat, ".chat", "chat: want \"transport:id\", e.g. \"telegram:123456789\", got %q", q.Chat))
		}
		qh, err := quietHours(q.QuietHours, q.QuietMinSeverity)
		if err != nil && q.QuietHours != "" {
			errs = append(errs, c.EntryErrorAt("quiet", i, q.Chat, ".quiet_hours", "%v", err))
		}
		if ok && err == nil && !qh.IsZero() {
			out.quiet[k] = qh
		}
	}
	var serrs config.Errors
	out.sharing, serrs = sharingFromConfig(c)
	errs = append(errs, serrs...)
	for i := range c.Schedules {
		s, serrs := scheduleFromConfig(c, i, jobs)
		errs = append(errs, serrs...)
		out.schedules = append(out.schedules, s)
	}
	var lerrs config.Errors
	out.langs, lerrs = languagesFromConfig(c)
	errs = append(errs, lerrs...)
	for i := range out.channels {
		out.channels[i].opts.Lang = out.langs.For(c.Push[i].ChannelName())
	}
	for i, rc := range c.Alerts {
		r, rerrs := ruleFromConfig(c, fmt.Sprintf("alerts[%d]", i), rc)
		errs = append(errs, rerrs...)
		if len(rerrs) == 0 {
			out.alerts = append(out.alerts, r)
		}
	}
	return out, errs
}

// ruleFromConfig makes an alert rule; its errors name the rule's keys.
func ruleFromConfig(c *config.Config, key string, rc config.AlertRuleConfig) (trainer.AlertRule, config.Errors) {
	var errs config.Errors
	r := trainer.AlertRule{Metric: strings.TrimSpace(rc.Metric), When: strings.TrimSpace(rc.When), Message: rc.Message}
	if rc.Value != nil {
		r.Value = *rc.Value
	} else if r.When != trainer.RuleNoImprovement {
		errs = append(errs, c.ErrorAt(key, "value: %s needs a value to compare with", def(r.When, "a rule")))
	}
	steps, d, err := trainer.ParseFor(rc.For, config.ParseDuration)
	if err != nil {
		errs = append(errs, c.ErrorAt(key+".for", "%v", err))
	}
	r.ForSteps, r.ForTime = steps, d
	if err := r.Validate(); err != nil && len(errs) == 0 {
		errs = append(errs, keyErrors(c, key, err)...)
	}
	return r, errs
}

// jobFromConfig makes job i; skipChecks leaves out the checks of the job as
// a whole (config.Validate already found it at fault).
func jobFromConfig(c *config.Config, i int, skipChecks bool) (*trainer.Job, config.Errors) {
	jc := c.Jobs[i]
	key := fmt.Sprintf("jobs[%d]", i)
	var errs config.Errors
	j := &trainer.Job{
		Name: jc.Name, Description: jc.Description, Command: jc.Command, Dir: config.ExpandHome(jc.Dir),
		Env: jc.Env, Lock: jc.Lock, StopGrace: time.Duration(jc.StopGrace), KillGrace: time.Duration(jc.KillGrace),
		StallAfter: time.Duration(jc.StallAfter), NaNAfter: jc.NaNAfter, StopOnNaN: jc.StopOnNaN,
		Patterns: jc.Patterns, AllRanks: jc.AllRanks, MaxLogBytes: int64(jc.MaxLogSize), TailLines: jc.TailLines,
		TensorBoard: config.ExpandHome(jc.TensorBoard), Params: map[string]trainer.ParamSpec{},
	}
	for pi, p := range jc.Patterns {
		if _, err := logparse.CompilePattern(p); err != nil {
			errs = append(errs, c.ErrorAt(fmt.Sprintf("%s.patterns[%d]", key, pi), "%v", err))
		}
	}
	if o := jc.OnOOM; o != nil {
		if o.Retry < 1 || o.Retry > trainer.MaxOOMRetries {
			errs = append(errs, c.ErrorAt(key+".on_oom.retry", "want 1..%d retries, got %d", trainer.MaxOOMRetries, o.Retry))
		}
		j.OnOOM = &trainer.OOMRetry{Retry: o.Retry, Halve: o.Halve, NoFit: o.Fit != nil && !*o.Fit}
	}
	if o := jc.OnFailure; o != nil {
		j.OnFailure = &trainer.FailureRetry{Retry: o.Retry, When: o.When, Backoff: time.Duration(o.Backoff), RequireCheckpoint: o.RequireCheckpoint}
	}
	j.Checkpoint, j.Resume = config.ExpandHome(jc.Checkpoint), jc.Resume
	j.Runner, j.MaxQueue = jc.Runner, jc.MaxQueue
	if jc.Host != "" {
		j.Hosts = []string{jc.Host}
	} else if len(jc.Hosts) > 0 {
		j.Hosts = []string(jc.Hosts)
	}
	j.GPUs = trainer.GPURequest{Count: jc.GPUs.Count, Indices: jc.GPUs.Indices, Memory: int64(jc.GPUMemory)}
	if j.GPUs.Memory > 0 && j.GPUs.Count == 0 {
		j.GPUs.Count = 1 // gpu_memory alone: one GPU with that much free
	}
	for ri, rc := range jc.Alerts {
		r, rerrs := ruleFromConfig(c, fmt.Sprintf("%s.alerts[%d]", key, ri), rc)
		errs = append(errs, rerrs...)
		j.Alerts = append(j.Alerts, r)
	}
	if sc := jc.Slurm; sc != nil {
		j.Slurm = slurm.Options{Partition: sc.Partition, Time: sc.Time, Nodes: sc.Nodes, NtasksPerNode: sc.NtasksPerNode,
			CPUsPerTask: sc.CPUsPerTask, Account: sc.Account, QOS: sc.QOS, ExtraArgs: sc.ExtraArgs}
		if sc.GPUs != nil {
			j.Slurm.GPUs = config.ScalarText(sc.GPUs)
		}
		if sc.Mem != nil {
			j.Slurm.Mem = config.ScalarText(sc.Mem)
		}
		var oe *slurm.OptionError
		if err := j.Slurm.Validate(); errors.As(err, &oe) {
			errs = append(errs, c.ErrorAt(key+".slurm."+oe.Field, "%q: %s", oe.Value, oe.Want))
		}
	}
	for n, pc := range jc.Params {
		j.Params[n] = paramSpec(pc)
	}
	if len(jc.Live) > 0 {
		j.Live = map[string]trainer.ParamSpec{}
		for n, pc := range jc.Live {
			j.Live[n] = paramSpec(pc)
		}
	}
	if sc := jc.Signals; sc != nil {
		// Unknown names are config.Validate's; which signal suits which
		// key is the job's Normalize.
		j.Signals.Stop, _ = config.SignalNumber(sc.Stop)
		j.Signals.Checkpoint, _ = config.SignalNumber(sc.Checkpoint)
		j.Signals.Control, _ = config.SignalNumber(sc.Control)
	}
	if len(errs) == 0 && !skipChecks {
		if err := j.Normalize(); err != nil {
			errs = append(errs, keyErrors(c, key, err)...)
		}
	}
	return j, errs
}

// paramSpec is a declared parameter or live value.
func paramSpec(pc config.ParamConfig) trainer.ParamSpec {
	spec := trainer.ParamSpec{Type: trainer.ParamType(pc.Type), Min: pc.Min, Max: pc.Max, Env: pc.Env, Help: pc.Help, Choices: pc.ChoicesText()}
	spec.Default, spec.HasDefault = pc.DefaultText()
	return spec
}

// keyErrors tells the errors of a job's Normalize or a rule's Validate
// under key: a trainer.KeyError ("params.bs.default") at that key's line,
// anything else at key's.
func keyErrors(c *config.Config, key string, err error) config.Errors {
	var errs config.Errors
	for _, e := range unwrapAll(err) {
		if ke, ok := errors.AsType[*trainer.KeyError](e); ok {
			errs = append(errs, c.ErrorAt(key+"."+ke.Key, "%s", ke.Msg))
			continue
		}
		errs = append(errs, c.ErrorAt(key, "%s", e.Error()))
	}
	return errs
}

// pushFromConfig makes push channel i's options. Errors never show a URL,
// key or secret; those of where it sends are config.Validate's.
func pushFromConfig(c *config.Config, i int) (pushChannel, config.Errors) {
	p := c.Push[i]
	var errs config.Errors
	add := func(sub, format string, args ...any) {
		errs = append(errs, c.EntryErrorAt("push", i, p.Name, sub, format, args...))
	}
	name := p.Name
	if name == "" {
		name = p.Kind
	}
	ch := pushChannel{progress: p.Progress}
	ch.opts = push.Options{Kind: p.Kind, Name: name, PerMinute: p.PerMinute, Timeout: time.Duration(p.Timeout)}
	if ch.opts.Timeout == 0 {
		ch.opts.Timeout = 10 * time.Second
	}
	spec, known := push.SpecOf(p.Kind)
	if !known {
		hint := ""
		if h := push.KindHint(p.Kind); h != "" {
			hint = " (" + h + ")"
		}
		add(".kind", "kind: want %s or %s, got %q%s", strings.Join(push.Kinds[:len(push.Kinds)-1], ", "), push.Kinds[len(push.Kinds)-1], p.Kind, hint)
		return ch, errs
	}
	ep, _ := c.PushEndpoint(i) // its errors are config.Validate's
	ch.opts.URL, ch.opts.Secret = ep.URL, ep.Secret
	errs = append(errs, pushWhere(c, i, spec, ep, &ch.opts)...)
	if ep.Secret != "" && !spec.Signs {
		add(".secret", "%s do not sign messages: remove the secret", spec.What)
	}
	if p.Alerts != nil {
		ch.alerts = []string{}
		for j, a := range p.Alerts {
			if !slices.Contains(chat.AlertKinds, a) {
				add(fmt.Sprintf(".alerts[%d]", j), "alerts: unknown kind %q; the kinds are %s", a, strings.Join(chat.AlertKinds, ", "))
				continue
			}
			ch.alerts = append(ch.alerts, a)
		}
	}
	q, err := quietHours(p.QuietHours, p.QuietMinSeverity)
	if err != nil {
		add(".quiet_hours", "%v", err)
	}
	ch.quiet = q
	if most := spec.MaxPerMinute; p.PerMinute < 0 || p.PerMinute > most {
		add(".per_minute", "per_minute: want 1..%d for %s (0: the default), got %d", most, p.Kind, p.PerMinute)
	}
	return ch, errs
}

// pushWhere checks and sets where push entry i sends, by its kind: a
// robot's or a webhook's url (or a robot's key, from which its URL is
// made); a service's key (or ntfy's topic) and optionally its API base;
// email's server and addresses. A key one kind takes is refused by the
// others, naming it.
func pushWhere(c *config.Config, i int, spec push.Spec, ep config.PushEndpoint, o *push.Options) config.Errors {
	p := c.Push[i]
	var errs config.Errors
	add := func(sub, format string, args ...any) {
		errs = append(errs, c.EntryErrorAt("push", i, p.Name, sub, format, args...))
	}
	own := map[string]string{"topic": p.Topic, "template": p.Template}
	for _, k := range []string{"topic", "template"} {
		if own[k] != "" && !slices.Contains(spec.Takes, k) {
			add("."+k, "%s: %s take no %s", k, spec.What, k)
		}
	}
	mail := map[string]bool{"smtp": p.SMTP != "", "from": p.From != "", "to": p.To != nil, "username": p.Username != "",
		"password": p.Password != "", "password_env": p.PasswordEnv != "", "tls": p.TLS != ""}
	if !spec.Mail {
		for _, k := range []string{"smtp", "from", "to", "username", "password", "password_env", "tls"} {
			if mail[k] {
				add("."+k, "%s: only email takes %s", k, k)
			}
		}
	}
	switch {
	case spec.Mail:
		for _, f := range []string{ep.URLField, ep.KeyField} {
			if f != "" {
				add("."+f, "%s: email sends over SMTP: give smtp = \"host:port\", from and to", f)
			}
		}
		o.Mail = push.Mail{SMTP: p.SMTP, From: p.From, To: p.To, Username: p.Username, Password: ep.Password, TLS: p.TLS}
		errs = append(errs, mailErrors(c, i, o.Mail)...)
		if o.Mail.TLS == "" {
			o.Mail.TLS = push.MailSTARTTLS
		}
	case spec.API != "":
		o.Key = ep.Key
		if spec.KeyRequired && ep.Key == "" {
			add("", "give the %s as key or key_env", spec.Key)
		}
		if ep.KeyField != "" && spec.Key == "" {
			add("."+ep.KeyField, "%s: %s take no key", ep.KeyField, spec.What)
		}
		if slices.Contains(spec.Takes, "topic") {
			o.Topic = p.Topic
			if p.Topic == "" {
				add("", "give the topic, e.g. topic = \"trainbot-lab-x7q2\" (anyone who knows a topic on a public server can read it: make it hard to guess)")
			} else if strings.ContainsAny(p.Topic, "/?&# ") {
				add(".topic", "topic: want letters, digits, '-' or '_', got a value with '/', '?', '&', '#' or space")
			}
		}
		if slices.Contains(spec.Takes, "template") {
			o.Template = p.Template
			if t := p.Template; t != "" && !slices.Contains(push.PushPlusTemplates, t) {
				add(".template", "template: want %s, got %q", strings.Join(push.PushPlusTemplates, ", "), t)
			}
		}
	default:
		switch {
		case ep.URLField != "" && ep.KeyField != "":
			add("."+ep.KeyField, "give only one of %s, %s", ep.URLField, ep.KeyField)
		case ep.KeyField != "":
			u, ok := push.KeyURL(p.Kind, ep.Key)
			if !ok {
				add("."+ep.KeyField, "%s: %s have no key: give the url", ep.KeyField, spec.What)
			}
			o.URL = u
		case ep.URLField == "":
			if spec.KeyBase != "" {
				add("", "give the webhook as url, url_env, key or key_env")
			} else {
				add("", "give the webhook as url or url_env")
			}
		}
	}
	return errs
}

// mailErrors checks an email channel's server, addresses and TLS.
func mailErrors(c *config.Config, i int, m push.Mail) config.Errors {
	p := c.Push[i]
	var errs config.Errors
	add := func(sub, format string, args ...any) {
		errs = append(errs, c.EntryErrorAt("push", i, p.Name, sub, format, args...))
	}
	if m.SMTP == "" {
		add("", "give the mail server as smtp = \"host:port\", e.g. \"smtp.gmail.com:587\"")
	} else if host, port, err := net.SplitHostPort(m.SMTP); err != nil || host == "" || port == "" {
		add(".smtp", "smtp: want \"host:port\", e.g. \"smtp.gmail.com:587\", got %q", m.SMTP)
	}
	if m.From == "" {
		add("", "give the sender as from = \"trainbot@example.org\"")
	} else if _, err := mail.ParseAddress(m.From); err != nil {
		add(".from", "from: %q is not an email address: %v", m.From, err)
	}
	if len(m.To) == 0 {
		add("", "give the recipients as to = [\"you@example.org\"]")
	}
	for j, to := range m.To {
		if _, err := mail.ParseAddress(to); err != nil {
			add(fmt.Sprintf(".to[%d]", j), "to: %q is not an email address: %v", to, err)
		}
	}
	if m.TLS != "" && !slices.Contains(push.MailTLSModes, m.TLS) {
		add(".tls", "tls: want %s, got %q", strings.Join(push.MailTLSModes, ", "), m.TLS)
	}
	if m.TLS == push.MailNoTLS && m.Password != "" {
		add(".tls", "tls = \"none\" would send the password in plain text: use \"starttls\" or \"tls\"")
	}
	if (m.Username == "") != (m.Password == "") {
		if m.Username == "" {
			add(".password", "a password without a username: give username too")
		} else {
			add(".username", "a username without a password: give password_env too")
		}
	}
	return errs
}

// quietHours reads quiet_hours and quiet_min_severity (default warning).
func quietHours(span, min string) (deliver.QuietHours, error) {
	sev := chat.SeverityWarning
	if min != "" {
		s, err := chat.ParseSeverity(min)
		if err != nil {
			return deliver.QuietHours{}, fmt.Errorf("quiet_min_severity: %v", err)
		}
		sev = s
	}
	if span == "" {
		return deliver.QuietHours{}, nil
	}
	return deliver.ParseQuietHours(span, sev)
}

// scheduleFromConfig makes schedule i: its spec, and for a start the job
// (one of jobs, by index) and the parameters it is started with.
func scheduleFromConfig(c *config.Config, i int, jobs map[int]*trainer.Job) (scheduleEntry, config.Errors) {
	sc := c.Schedules[i]
	var errs config.Errors
	add := func(sub, format string, args ...any) {
		errs = append(errs, c.EntryErrorAt("schedules", i, sc.Name, sub, format, args...))
	}
	s := scheduleEntry{Name: sc.Name, Spec: sc.Spec, Action: sc.Action, Job: sc.Job, Params: sc.ParamsText()}
	if _, err := schedule.Parse(sc.Spec); err != nil {
		reason := err.Error()
		var se *schedule.SpecError
		if errors.As(err, &se) {
			reason = se.Reason
		}
		add(".spec", "spec %q: %s", sc.Spec, reason)
	}
	if sc.Action != config.ActionStart {
		return s, errs
	}
	job := jobs[c.StartJob(i)]
	if job == nil {
		return s, errs // no such job, or one with errors of its own: told there
	}
	s.Job = job.Name
	if _, err := job.ResolveParams(s.Params); err != nil {
		for _, e := range unwrapAll(err) {
			add(".params", "params: %v", e)
		}
	}
	return s, errs
}

// sharingFromConfig resolves [store] shared_group (private.LookupGroup);
// none leaves the data directory private.
func sharingFromConfig(c *config.Config) (private.Sharing, config.Errors) {
	name := c.Store.SharedGroup
	if name == "" {
		return private.NotShared, nil
	}
	s, err := private.LookupGroup(name)
	if err != nil {
		return private.NotShared, config.Errors{c.ErrorAt("store.shared_group", "%v", err)}
	}
	return s, nil
}

func unwrapAll(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
