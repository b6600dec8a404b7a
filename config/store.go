package config

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// StoreConfig is the [store] section: the data directory's privacy.
type StoreConfig struct {
	// SharedGroup, when set, shares the data directory with a Unix group
	// (a name or a numeric gid): the directory belongs to the group with
	// mode 2750 and trainbot's files are 0640, so the group's members can
	// read the history, run logs and charts; no one else can. Empty: the
	// directory is 0700 and every file 0600.
	SharedGroup string `toml:"shared_group"`
	// KeepSamples is how long GPU samples and runs' memory samples are
	// kept (default 30 days; "0": forever). Runs, their points and their
	// peak memory are kept forever.
	KeepSamples Duration `toml:"keep_samples"`
	// KeepAudit is how long the audit keeps commands (default 365 days;
	// "0": forever).
	KeepAudit Duration `toml:"keep_audit"`
}

// Retention defaults.
const (
	DefaultKeepSamples = Duration(30 * 24 * time.Hour)
	DefaultKeepAudit   = Duration(365 * 24 * time.Hour)
)

// RetentionText describes what the store keeps, for trainbot check.
func (s StoreConfig) RetentionText() string {
	keep := func(d Duration) string {
		if d == 0 {
			return "forever"
		}
		if d%Duration(24*time.Hour) == 0 {
			return fmt.Sprintf("%d days", time.Duration(d)/(24*time.Hour))
		}
		return time.Duration(d).String()
	}
	return fmt.Sprintf("store: GPU and run memory samples kept %s, the audit %s; runs, their metric points and peak memory forever",
		keep(s.KeepSamples), keep(s.KeepAudit))
}

var groupName = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_.-]{0,31}\$?|[0-9]{1,10})$`)

// validateStore checks the shape of [store]; whether the group exists and
// trainbot's user is in it is checked where the directory is made
// (cmd/trainbot).
func (c *Config) validateStore() Errors {
	g := strings.TrimSpace(c.Store.SharedGroup)
	c.Store.SharedGroup = g
	if g != "" && !groupName.MatchString(g) {
		return Errors{c.ErrorAt("store.shared_group", "want a Unix group name (letters, digits, '_', '-', '.') or a numeric gid, got %q", g)}
	}
	return nil
}

// SecretEnv returns the names of the environment variables that hold this
// config's secrets: the TRAINBOT_ variable of every declared section's
// secret key (TRAINBOT_TELEGRAM_TOKEN, TRAINBOT_WECOM_SECRET…) and the
// value of every key named *_env (a [[push]] entry's url_env, key_env,
// secret_env, a section's secret_env), in the order of the file. Runs
// must not inherit them.
func (c *Config) SecretEnv() []string {
	names := c.sectionEnv()
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Struct:
			t := v.Type()
			for i := range t.NumField() {
				f := v.Field(i)
				tag := t.Field(i).Tag.Get("toml")
				if f.Kind() == reflect.String && strings.HasSuffix(tag, "_env") {
					if n := f.String(); n != "" && !slices.Contains(names, n) {
						names = append(names, n)
					}
					continue
				}
				if t.Field(i).IsExported() {
					walk(f)
				}
			}
		case reflect.Slice:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem())
			}
		}
	}
	walk(reflect.ValueOf(c).Elem())
	for _, s := range c.sections {
		walk(reflect.ValueOf(s.value).Elem())
	}
	return names
}

// secretName is the shape of an environment variable that holds a
// credential (HF_TOKEN, WANDB_API_KEY, AWS_SECRET_ACCESS_KEY…).
var secretName = regexp.MustCompile(`(?i)(TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|(^|_)KEY$)`)

// SecretsInFile returns the keys of the config file that hold a secret
// written in the file itself: telegram.token, a push entry's url, key,
// secret or password (a robot's URL carries its key), and a job's env entry that looks
// like a credential (jobs[0].env.WANDB_API_KEY) or is one of SecretEnv's.
// Secrets from the environment do not count: the file does not hold them.
func (c *Config) SecretsInFile() []string {
	var keys []string
	has := func(k string) bool { _, ok := c.lines[k]; return ok }
	keys = append(keys, c.sectionSecretsInFile()...)
	for i := range c.Push {
		for _, f := range []string{"url", "key", "secret", "password"} {
			if k := fmt.Sprintf("push[%d].%s", i, f); has(k) {
				keys = append(keys, k)
			}
		}
	}
	secret := c.SecretEnv()
	for i, j := range c.Jobs {
		var names []string
		for name := range j.Env {
			if secretName.MatchString(name) || slices.Contains(secret, name) {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		for _, name := range names {
			keys = append(keys, fmt.Sprintf("jobs[%d].env.%s", i, name))
		}
	}
	return keys
}
