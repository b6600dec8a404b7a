package config

import (
	"fmt"
	"maps"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"
)

// A Section is a table of the file that another package declares for
// itself (Declare): a chat transport's [telegram] or [wecom] lives in the
// transport's package, not here. The value is a pointer to a struct with
// toml tags that holds the section's defaults; Parse decodes [name] into
// it with the same strictness as the rest of the file (a wrong type or an
// unknown key names the key and its line, with a "did you mean" hint),
// ApplyEnv sets its scalar keys from TRAINBOT_<NAME>_<KEY>, and Validate
// calls Check.
type Section interface {
	// Check validates the section's values once the file and the
	// environment are read; it may fill in defaults and read secrets
	// from the environment (Checker.Secret). Problems go to the Checker.
	Check(ck *Checker)
	// Secrets are the section's keys that hold a secret ("token",
	// "secret"): written in the file they are flagged by SecretsInFile,
	// and their TRAINBOT_ variables are kept from runs (SecretEnv).
	Secrets() []string
}

// A MemberSection's users are listed in [auth] as NAME_operators and
// NAME_viewers: string ids of the messenger (Config.Members).
type MemberSection interface {
	Section
	// MemberIDs says what a user id of this messenger is, for the error
	// about one that is not: "a WeCom userid".
	MemberIDs() string
}

// Members are the users of one messenger that [auth] lists.
type Members struct {
	Operators []string
	Viewers   []string
}

// declared is one Declare.
type declared struct {
	name  string
	value Section
}

// Declare adds [name] to the schema, decoded into s (a pointer to a
// struct with toml tags, holding the defaults). It is called before
// Parse; a name that is already a key panics, as a programming error.
func (c *Config) Declare(name string, s Section) {
	if v := reflect.ValueOf(s); v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("config: section %q is not a pointer to a struct", name))
	}
	if slices.Contains(knownKeys(reflect.TypeOf(Config{}), nil), name) || c.Section(name) != nil {
		panic(fmt.Sprintf("config: section %q is declared twice", name))
	}
	c.sections = append(c.sections, declared{name, s})
}

// Section returns the declared [name] with its values, or nil.
func (c *Config) Section(name string) Section {
	for _, d := range c.sections {
		if d.name == name {
			return d.value
		}
	}
	return nil
}

// Sections are the names of the declared sections, in the order declared.
func (c *Config) Sections() []string {
	out := make([]string, len(c.sections))
	for i, d := range c.sections {
		out[i] = d.name
	}
	return out
}

// Members returns the users [auth] lists for the messenger of section
// name (NAME_operators, NAME_viewers).
func (c *Config) Members(name string) Members { return c.Auth.members[name] }

// memberKeys are the [auth] keys of the declared member sections, each
// with its section and role.
func (c *Config) memberKeys() map[string][2]string {
	out := map[string][2]string{}
	for _, d := range c.sections {
		if _, ok := d.value.(MemberSection); ok {
			out[d.name+"_operators"] = [2]string{d.name, "operators"}
			out[d.name+"_viewers"] = [2]string{d.name, "viewers"}
		}
	}
	return out
}

// schema is the type the file is checked against for unknown keys:
// Config's, with each declared section beside the built-in ones and the
// member lists in [auth].
func (c *Config) schema() reflect.Type {
	t := reflect.TypeOf(Config{})
	if len(c.sections) == 0 {
		return t
	}
	var fields []reflect.StructField
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if f.Tag.Get("toml") == "auth" {
			at := f.Type
			var afs []reflect.StructField
			for j := range at.NumField() {
				if af := at.Field(j); af.IsExported() {
					afs = append(afs, af)
				}
			}
			keys := c.memberKeys()
			for _, k := range slices.Sorted(maps.Keys(keys)) {
				afs = append(afs, reflect.StructField{Name: fmt.Sprintf("M%d", len(afs)), Type: reflect.TypeOf([]string(nil)), Tag: reflect.StructTag(`toml:"` + k + `"`)})
			}
			f.Type = reflect.StructOf(afs)
		}
		fields = append(fields, f)
	}
	for i, d := range c.sections {
		fields = append(fields, reflect.StructField{Name: fmt.Sprintf("S%d", i), Type: reflect.TypeOf(d.value).Elem(), Tag: reflect.StructTag(`toml:"` + d.name + `"`)})
	}
	return reflect.StructOf(fields)
}

// decodeSections decodes the declared sections and the member lists of
// [auth] from the document; Config's own fields are decodeStruct's.
func (c *Config) decodeSections(d *decoder, doc map[string]any) {
	for _, s := range c.sections {
		if v, ok := doc[s.name]; ok {
			d.decodeValue(s.name, v, reflect.ValueOf(s.value).Elem())
		}
	}
	auth, _ := doc["auth"].(map[string]any)
	keys := c.memberKeys()
	for _, k := range sortedKeys(auth) {
		which, ok := keys[k]
		if !ok {
			continue
		}
		var ids []string
		d.decodeValue("auth."+k, auth[k], reflect.ValueOf(&ids).Elem())
		if c.Auth.members == nil {
			c.Auth.members = map[string]Members{}
		}
		m := c.Auth.members[which[0]]
		if which[1] == "operators" {
			m.Operators = ids
		} else {
			m.Viewers = ids
		}
		c.Auth.members[which[0]] = m
	}
}

// messengerID is the shape of a messenger's user id in [auth]: letters,
// digits and a few marks, no spaces.
var messengerID = regexp.MustCompile(`^[A-Za-z0-9_.@$-]{1,128}$`)

// validateSections checks each declared section (its Check) and the
// member lists of [auth].
func (c *Config) validateSections() Errors {
	var errs Errors
	for _, s := range c.sections {
		ck := &Checker{c: c, section: s.name}
		s.value.Check(ck)
		errs = append(errs, ck.errs...)
		ms, ok := s.value.(MemberSection)
		if !ok {
			continue
		}
		m := c.Auth.members[s.name]
		for _, l := range []struct {
			key string
			ids []string
		}{{s.name + "_operators", m.Operators}, {s.name + "_viewers", m.Viewers}} {
			for _, id := range l.ids {
				if !messengerID.MatchString(id) {
					errs = append(errs, c.ErrorAt("auth."+l.key, "%q is not a user id (the bot tells a stranger their id: %s)", id, ms.MemberIDs()))
				}
			}
		}
	}
	return errs
}

// A Checker collects the problems of one declared section, each at its
// key and line; it is what Section.Check is given.
type Checker struct {
	c       *Config
	section string
	errs    Errors
}

// Key is the full key of the section's key k ("wecom.secret"); "" is the
// section itself.
func (ck *Checker) Key(k string) string {
	if k == "" {
		return ck.section
	}
	return ck.section + "." + k
}

// Errorf reports a problem with the section's key k ("" for the section).
func (ck *Checker) Errorf(k, format string, args ...any) {
	ck.errs = append(ck.errs, ck.c.ErrorAt(ck.Key(k), format, args...))
}

// InFile reports whether the file sets the section's key k.
func (ck *Checker) InFile(k string) bool { return ck.c.InFile(ck.Key(k)) }

// Secret fills *value from the environment variable env names (the
// section's key envKey) when env is set: giving both, or naming a
// variable that is not set, is an error. A secret is never repeated in a
// message.
func (ck *Checker) Secret(key string, value *string, envKey, env string) {
	if env == "" {
		return
	}
	if *value != "" {
		ck.Errorf(envKey, "give only one of %s, %s", key, envKey)
		return
	}
	v, ok := lookupEnv(env)
	if !ok || v == "" {
		ck.Errorf(envKey, "%s: the environment variable %s is not set", envKey, env)
		return
	}
	*value = v
}

// Need says that a section turned on (on) needs each of keys to have a
// value, and that one turned off sets none of them: keys are pairs of a
// key and its value, the first the one that turns the section on.
func (ck *Checker) Need(on bool, keys ...[2]string) {
	if !on {
		for _, f := range keys {
			if f[1] != "" {
				ck.Errorf(f[0], "%s is set but %s is not: [%s] needs both", f[0], keys[0][0], ck.section)
				return
			}
		}
		return
	}
	for _, f := range keys {
		if f[1] == "" {
			ck.Errorf("", "[%s] needs %s", ck.section, f[0])
		}
	}
}

// BaseURL checks that the key k holds a URL with a host and one of
// schemes.
func (ck *Checker) BaseURL(k, v string, schemes ...string) {
	u, err := url.Parse(v)
	ok := err == nil && u.Host != ""
	if ok {
		ok = slices.Contains(schemes, u.Scheme)
	}
	if !ok {
		ck.Errorf(k, "want a URL like %s://host, got %q", schemes[0], v)
	}
}

// LegacyProgressInterval is what a section's deprecated progress_interval
// key says ([telegram] progress_interval, from before [chat] had one):
// ProgressInterval uses it when [chat] progress_interval is not set.
func (ck *Checker) LegacyProgressInterval(d time.Duration) { ck.c.legacyProgress = &d }

// sectionEnv returns the TRAINBOT_ variables of the declared sections'
// secret keys (TRAINBOT_TELEGRAM_TOKEN).
func (c *Config) sectionEnv() []string {
	var out []string
	for _, s := range c.sections {
		for _, k := range s.value.Secrets() {
			out = append(out, EnvPrefix+strings.ToUpper(s.name+"_"+k))
		}
	}
	return out
}

// sectionSecretsInFile are the declared sections' secret keys the file
// sets to a value.
func (c *Config) sectionSecretsInFile() []string {
	var out []string
	for _, s := range c.sections {
		v := reflect.ValueOf(s.value).Elem()
		for _, k := range s.value.Secrets() {
			if !c.InFile(s.name + "." + k) {
				continue
			}
			for i := range v.NumField() {
				if v.Type().Field(i).Tag.Get("toml") == k && !v.Field(i).IsZero() {
					out = append(out, s.name+"."+k)
				}
			}
		}
	}
	return out
}
