// Package i18n is trainbot's one message catalog and the languages it
// speaks: Chinese ("zh"), English ("en"), and "zh+en", the mixed style
// trainbot always had (English prose with the Chinese command words and
// bilingual buttons such as [停止 Stop]).
//
// A message is a Msg value declared with Def in this package's catalog
// files, so every text a user can read is in one place and a test checks
// that each has its Chinese and its English. Lang.T formats a message in a
// language with fmt verbs; English has two plural forms (One is used when
// the first argument is the integer 1), Chinese has one.
//
// The catalog is typed Go rather than golang.org/x/text/message catalogs:
// the third language, zh+en, is a style rather than a locale (it would need
// a made-up language tag), a message is a Go identifier the compiler checks
// instead of a string key that silently falls back to itself when
// mistyped, completeness is a plain loop over one table, and the only
// plural rule needed (English one/other; Chinese none) is one field.
package i18n

import (
	"fmt"
	"strings"
	"time"

	"github.com/trainbot/trainbot/internal/units"
)

// Lang is a language a chat is spoken to in. The zero value is ZhEn,
// today's style, so that code that never chose one keeps it.
type Lang uint8

// The languages.
const (
	ZhEn Lang = iota // "zh+en": English prose, Chinese command words, bilingual buttons
	Zh               // "zh": Chinese
	En               // "en": English
)

// Langs are the languages, in the order of their names in Names.
var Langs = []Lang{Zh, En, ZhEn}

// Names are the accepted values of a language setting.
const Names = `"zh", "en" or "zh+en"`

func (l Lang) String() string {
	switch l {
	case Zh:
		return "zh"
	case En:
		return "en"
	}
	return "zh+en"
}

// Parse reads a language setting: "zh", "en" or "zh+en" (any case; "en+zh"
// and "zh-CN" are read too).
func Parse(s string) (Lang, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "zh", "zh-cn", "zh_cn", "cn", "chinese", "中文":
		return Zh, nil
	case "en", "english":
		return En, nil
	case "zh+en", "en+zh", "mixed":
		return ZhEn, nil
	}
	return ZhEn, fmt.Errorf("%q is not a language: want %s", s, Names)
}

// Msg is one message of the catalog. ZH and EN are required (the catalog
// test fails without either); Mix is the zh+en form where it differs from
// EN. One and MixOne are the English forms used when the count argument
// is 1 ("1 line" against "%d lines"); the count is the first argument, or
// the N-th (from 1) when N is set.
type Msg struct {
	Key    string
	ZH     string
	EN     string
	Mix    string
	One    string
	MixOne string
	N      int
}

var catalog = map[string]*Msg{}

// Def adds a message to the catalog and returns it. Keys are unique; a
// second Def of a key panics at start, so a clash cannot ship.
func Def(m Msg) Msg {
	if _, dup := catalog[m.Key]; dup || m.Key == "" {
		panic("i18n: message key " + m.Key + " defined twice or empty")
	}
	catalog[m.Key] = &m
	return m
}

// Catalog returns every message, for the completeness test and tools.
func Catalog() []Msg {
	out := make([]Msg, 0, len(catalog))
	for _, m := range catalog {
		out = append(out, *m)
	}
	return out
}

// Format is the message's format string in l, for a first argument of
// count (plural); count < 0 means no count.
func (m Msg) Format(l Lang, count int64) string {
	one := count == 1
	switch l {
	case Zh:
		return m.ZH
	case En:
		if one && m.One != "" {
			return m.One
		}
		return m.EN
	}
	switch {
	case one && m.MixOne != "":
		return m.MixOne
	case one && m.One != "" && m.Mix == "":
		return m.One
	case m.Mix != "":
		return m.Mix
	}
	return m.EN
}

// T formats m in l with args, as fmt.Sprintf does.
func (l Lang) T(m Msg, args ...any) string {
	i := max(m.N, 1) - 1
	count := int64(-1)
	if i < len(args) {
		count = asCount(args[i])
	}
	f := m.Format(l, count)
	if len(args) == 0 {
		return f
	}
	return fmt.Sprintf(f, args...)
}

// asCount is an argument as a count when it is an integer, else -1.
func asCount(a any) int64 {
	switch v := a.(type) {
	case int:
		return int64(v)
	case int64:
		return v
	case int32:
		return int64(v)
	case uint:
		return int64(v)
	case uint64:
		return int64(v)
	}
	return -1
}

// Pick chooses between a Chinese and an English word for l (zh+en takes
// the English): for the words inside a message that are data, not prose.
func (l Lang) Pick(zh, en string) string {
	if l == Zh {
		return zh
	}
	return en
}

// Button is a button's label in l: "停止" in zh, "Stop" in en, "停止 Stop"
// in zh+en.
func (l Lang) Button(m Msg) string {
	switch l {
	case Zh:
		return m.ZH
	case En:
		return m.EN
	}
	return m.ZH + " " + m.EN
}

// Duration prints d compactly in l: "3m05s" in English and zh+en
// (internal/units.Duration); in Chinese "3 分 5 秒", "2 小时 5 分",
// "2 天 3 小时": a space between a number and its unit, as every count in
// the Chinese messages has ("240 步", "3 块显卡").
func (l Lang) Duration(d time.Duration) string {
	if l != Zh {
		return units.Duration(d)
	}
	neg := d < 0
	d = d.Abs()
	s := int64(d.Round(time.Second) / time.Second)
	sign := ""
	if neg && s != 0 {
		sign = "-"
	}
	dd, h, m, ss := s/86400, s%86400/3600, s%3600/60, s%60
	switch {
	case s < 60:
		return fmt.Sprintf("%s%d 秒", sign, ss)
	case s < 3600 && ss == 0:
		return fmt.Sprintf("%s%d 分钟", sign, m)
	case s < 3600:
		return fmt.Sprintf("%s%d 分 %d 秒", sign, m, ss)
	case s < 86400 && m == 0:
		return fmt.Sprintf("%s%d 小时", sign, h)
	case s < 86400:
		return fmt.Sprintf("%s%d 小时 %d 分", sign, h, m)
	case h == 0:
		return fmt.Sprintf("%s%d 天", sign, dd)
	}
	return fmt.Sprintf("%s%d 天 %d 小时", sign, dd, h)
}

// Percent is a share in l: " (35.0%)" in English and zh+en, "（35.0%）"
// in Chinese (full-width brackets, no space before the sign). verb is the
// number's fmt verb ("%.1f", "%+.0f").
func (l Lang) Percent(verb string, v float64) string {
	if l == Zh {
		return fmt.Sprintf("（"+verb+"%%）", v)
	}
	return fmt.Sprintf(" ("+verb+"%%)", v)
}

// Languages says which language each transport's chats are spoken to in.
type Languages struct {
	// Default is the language of a transport not in ByTransport.
	Default Lang
	// ByTransport maps a transport or push channel name ("telegram",
	// "wecom", "wecom:lab") to its language.
	ByTransport map[string]Lang
}

// For returns the language of a transport's chats.
func (s Languages) For(transport string) Lang {
	if l, ok := s.ByTransport[transport]; ok {
		return l
	}
	return s.Default
}
