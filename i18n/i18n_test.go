package i18n

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"
)

func hasHan(s string) bool {
	for _, r := range s {
		if unicode.Is(unicode.Han, r) {
			return true
		}
	}
	return false
}

// chinese reports whether s is written in Chinese: Han characters, or
// only Chinese punctuation (the list separator "；").
func chinese(s string) bool {
	if hasHan(s) {
		return true
	}
	for _, r := range s {
		if (r >= 0x3000 && r <= 0x303f) || (r >= 0xff00 && r <= 0xffef) {
			return true
		}
	}
	return false
}

// verb finds the fmt verbs of a format string.
var verb = regexp.MustCompile(`%(\[\d+\])?[-+# 0]*[\d.]*[a-zA-Z%]`)

// sampleArgs makes arguments that fit the verbs of f (as the English form
// uses them, in order).
func sampleArgs(f string) []any {
	var args []any
	for _, v := range verb.FindAllString(f, -1) {
		switch v[len(v)-1] {
		case '%':
		case 'd':
			args = append(args, 7)
		case 'f', 'g', 'e':
			args = append(args, 1.5)
		default:
			args = append(args, "x")
		}
	}
	return args
}

// TestCatalogComplete fails when a message exists in one language only:
// every message has Chinese (with Chinese characters in it) and English
// (without), and every form takes the same arguments as the English one.
func TestCatalogComplete(t *testing.T) {
	msgs := Catalog()
	if len(msgs) < 50 {
		t.Fatalf("the catalog has %d messages; the catalog files were not linked in", len(msgs))
	}
	for _, m := range msgs {
		t.Run(m.Key, func(t *testing.T) {
			if m.ZH == "" || m.EN == "" {
				t.Fatalf("zh %q, en %q: both languages are needed", m.ZH, m.EN)
			}
			if !chinese(m.ZH) {
				t.Errorf("zh %q has no Chinese in it", m.ZH)
			}
			for _, en := range []string{m.EN, m.One} {
				if hasHan(en) {
					t.Errorf("en %q has Chinese in it (the zh+en form is Mix)", en)
				}
			}
			args := sampleArgs(m.EN)
			for name, f := range map[string]string{"zh": m.ZH, "en": m.EN, "mix": m.Mix, "one": m.One, "mixOne": m.MixOne} {
				if f == "" {
					continue
				}
				got := fmt.Sprintf(f, args...)
				if strings.Contains(got, "%!") {
					t.Errorf("%s form %q does not take the English form's arguments %v: %s", name, f, args, got)
				}
			}
		})
	}
}

func TestParse(t *testing.T) {
	for in, want := range map[string]Lang{"zh": Zh, "EN": En, "zh+en": ZhEn, " en+zh ": ZhEn, "zh-CN": Zh} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := Parse("fr"); err == nil || !strings.Contains(err.Error(), Names) {
		t.Errorf("Parse(fr): got %v, want an error listing %s", err, Names)
	}
	for _, l := range Langs {
		if got, _ := Parse(l.String()); got != l {
			t.Errorf("Parse(%v.String()) = %v", l, got)
		}
	}
}

func TestPluralAndForms(t *testing.T) {
	m := Msg{Key: "t", ZH: "最近 %d 行", EN: "last %d lines", One: "last %d line", Mix: "last %d lines (日志)"}
	for _, c := range []struct {
		l    Lang
		n    int
		want string
	}{
		{En, 1, "last 1 line"}, {En, 2, "last 2 lines"}, {Zh, 1, "最近 1 行"}, {Zh, 3, "最近 3 行"},
		{ZhEn, 1, "last 1 lines (日志)"}, {ZhEn, 2, "last 2 lines (日志)"},
	} {
		if got := c.l.T(m, c.n); got != c.want {
			t.Errorf("%v %d: got %q, want %q", c.l, c.n, got, c.want)
		}
	}
	m.Mix = ""
	if got := ZhEn.T(m, 1); got != "last 1 line" {
		t.Errorf("zh+en without its own form takes English's plural: got %q", got)
	}
}

func TestDuration(t *testing.T) {
	for _, c := range []struct {
		d      time.Duration
		zh, en string
	}{
		{45 * time.Second, "45 秒", "45s"},
		{3*time.Minute + 5*time.Second, "3 分 5 秒", "3m05s"},
		{2 * time.Hour, "2 小时", "2h"},
		{2*time.Hour + 5*time.Minute, "2 小时 5 分", "2h05m"},
		{51 * time.Hour, "2 天 3 小时", "2d3h"},
		{-90 * time.Second, "-1 分 30 秒", "-1m30s"},
	} {
		if got := Zh.Duration(c.d); got != c.zh {
			t.Errorf("zh %v: got %q, want %q", c.d, got, c.zh)
		}
		if got := En.Duration(c.d); got != c.en {
			t.Errorf("en %v: got %q, want %q", c.d, got, c.en)
		}
	}
}

func TestLanguagesFor(t *testing.T) {
	s := Languages{Default: ZhEn, ByTransport: map[string]Lang{"wecom": Zh, "wecom:lab": En}}
	for tr, want := range map[string]Lang{"wecom": Zh, "wecom:lab": En, "telegram": ZhEn, "": ZhEn} {
		if got := s.For(tr); got != want {
			t.Errorf("For(%q) = %v, want %v", tr, got, want)
		}
	}
}

// BenchmarkT is the cost of wording a message against fmt.Sprintf of its
// English format: the catalog adds a plural check and a switch.
func BenchmarkT(b *testing.B) {
	for _, c := range []struct {
		name string
		f    func() string
	}{
		{"sprintf", func() string { return fmt.Sprintf(StepOf.EN, 615, 1500) }},
		{"en", func() string { return En.T(StepOf, 615, 1500) }},
		{"zh", func() string { return Zh.T(StepOf, 615, 1500) }},
		{"zh+en", func() string { return ZhEn.T(StepOf, 615, 1500) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				_ = c.f()
			}
		})
	}
}

func TestButton(t *testing.T) {
	for l, want := range map[Lang]string{Zh: "停止", En: "Stop", ZhEn: "停止 Stop"} {
		if got := l.Button(BtnStop); got != want {
			t.Errorf("%v: got %q, want %q", l, got, want)
		}
	}
}
