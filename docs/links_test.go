package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// pages are the Markdown files the links are checked in: both READMEs and
// every page under docs/ (the Chinese ones in docs/zh/ too).
func pages(t *testing.T) []string {
	t.Helper()
	files := []string{"../README.md", "../README.zh-CN.md"}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

var (
	fence    = regexp.MustCompile("(?ms)^```.*?^```")
	inline   = regexp.MustCompile("`[^`\n]*`")
	link     = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)|<img src="([^"]+)"`)
	heading  = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	htmlID   = regexp.MustCompile(`<a id="([^"]+)"></a>`)
	external = regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`)
	// linkText is a link's text with its target, for a heading's slug.
	linkText = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// prose is a page without its code: fenced blocks and inline code can show
// link-like text that is not a link.
func prose(md string) string {
	return inline.ReplaceAllString(fence.ReplaceAllString(md, ""), "")
}

// slug is GitHub's anchor for a heading: lower case, punctuation other
// than '-' and '_' dropped (letters of every script stay), spaces to '-'.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors are the fragments a page answers to: its headings (a repeated
// one gets -1, -2 as on GitHub) and its <a id="…"> tags.
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(md, ""), -1) {
		text := linkText.ReplaceAllString(m[1], "$1")
		s := slug(strings.ReplaceAll(text, "`", ""))
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	for _, m := range htmlID.FindAllStringSubmatch(md, -1) {
		out[m[1]] = true
	}
	return out
}

// Every relative link of every page names a file of the repository, and
// every #fragment a heading or <a id> of the page it points into.
func TestLinksResolve(t *testing.T) {
	files := pages(t)
	cache := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := cache[path]; ok {
			return a
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		cache[path] = anchors(string(data))
		return cache[path]
	}
	checked := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(prose(string(data)), -1) {
			target := m[1] + m[2]
			if external.MatchString(target) {
				continue
			}
			checked++
			file, frag, _ := strings.Cut(target, "#")
			path := f
			if file != "" {
				path = filepath.Join(filepath.Dir(f), file)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link %q: no file %s", f, target, path)
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			if !anchorsOf(path)[frag] {
				t.Errorf("%s: link %q: %s has no heading or anchor %q", f, target, path, frag)
			}
		}
	}
	if checked < 100 {
		t.Errorf("only %d relative links found in %d pages: the link pattern no longer matches the pages", checked, len(files))
	}
}

// The anchors follow GitHub's rule, so a link that works here works there.
func TestSlug(t *testing.T) {
	for h, want := range map[string]string{
		"Prometheus and /healthz":           "prometheus-and-healthz",
		"Several GPU servers (SSH)":         "several-gpu-servers-ssh",
		"通知空闲: tell me when GPUs free up":   "通知空闲-tell-me-when-gpus-free-up",
		"`trainbot init`: a starter config": "trainbot-init-a-starter-config",
		"企业微信（WeCom）":                       "企业微信wecom",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
	a := anchors("## A\n\n## A\n\n```\n## not a heading\n```\n<a id=\"x\"></a>\n")
	got := make([]string, 0, len(a))
	for k := range a {
		got = append(got, k)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"a", "a-1", "x"}) {
		t.Errorf("anchors = %q", got)
	}
}

// linksOf are the relative files page links to, cleaned and relative to
// the repository's root.
func linksOf(t *testing.T, page string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range link.FindAllStringSubmatch(prose(string(data)), -1) {
		file, _, _ := strings.Cut(m[1]+m[2], "#")
		if file != "" && !external.MatchString(file) {
			out[filepath.Clean(filepath.Join(filepath.Dir(page), file))] = true
		}
	}
	return out
}

// Every page is reachable: the README's index links each English page,
// the Chinese index each Chinese one, and the Chinese pages a reader is
// promised (the quick start and the three messengers' setup guides, the
// command table) exist.
func TestEveryPageIsLinked(t *testing.T) {
	readme := linksOf(t, "../README.md")
	zh := linksOf(t, "zh/README.md")
	for _, f := range pages(t) {
		switch {
		case strings.HasPrefix(f, "../"):
		case strings.HasPrefix(f, "zh/"):
			if f != "zh/README.md" && !zh[filepath.Clean(f)] {
				t.Errorf("docs/zh/README.md does not link %s", f)
			}
		default:
			if !readme[filepath.Join("..", "docs", f)] {
				t.Errorf("README.md's index does not link docs/%s", f)
			}
		}
	}
	for _, want := range []string{"zh/wecom.md", "zh/feishu.md", "zh/dingtalk.md", "zh/commands.md", "../README.zh-CN.md"} {
		if !zh[filepath.Clean(want)] {
			t.Errorf("docs/zh/README.md does not link %s", want)
		}
	}
	if !readme[filepath.Join("..", "docs", "zh", "README.md")] {
		t.Error("README.md does not link the Chinese pages (docs/zh/README.md)")
	}
}

// The Chinese setup guides are written for a reader of Chinese: the
// console's own menu names, and prose that is mostly Chinese.
func TestChineseGuidesAreChinese(t *testing.T) {
	menus := map[string][]string{
		"zh/wecom.md":    {"管理后台", "应用管理", "智能机器人", "长连接"},
		"zh/feishu.md":   {"创建企业自建应用", "凭证与基础信息", "权限管理", "事件与回调", "使用长连接接收事件", "版本管理与发布"},
		"zh/dingtalk.md": {"应用开发", "企业内部应用", "Stream 模式", "权限管理", "版本管理与发布"},
	}
	for page, words := range menus {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		text := prose(string(data))
		for _, w := range words {
			if !strings.Contains(text, w) {
				t.Errorf("%s does not name the console's %q", page, w)
			}
		}
		han, latin := 0, 0
		for _, r := range linkText.ReplaceAllString(text, "$1") {
			switch {
			case unicode.Is(unicode.Han, r):
				han++
			case r < 0x80 && unicode.IsLetter(r):
				latin++
			}
		}
		if han < latin {
			t.Errorf("%s has %d Chinese characters and %d Latin letters outside code: written for an English reader?", page, han, latin)
		}
	}
}
