package chat

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// readmeCommands reads the command words of the commands table in a
// README's section heading: the first word of each " / "-separated part of
// the first column (开始, 订阅, 静音) and every /word of the second.
func readmeCommands(t *testing.T, file, heading string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", file))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no %q section", file, heading)
	}
	slash := regexp.MustCompile(`/[a-z]+`)
	var words []string
	inTable := false
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cols := strings.Split(strings.ReplaceAll(line, `\|`, "¦"), "|")
		if len(cols) < 4 || strings.HasPrefix(strings.TrimSpace(cols[1]), "---") {
			continue
		}
		if first := strings.TrimSpace(cols[1]); first == "Chinese" || first == "中文" {
			continue
		}
		for _, part := range strings.Split(cols[1], " / ") {
			if f := strings.Fields(part); len(f) > 0 {
				words = append(words, f[0])
			}
		}
		words = append(words, slash.FindAllString(cols[2], -1)...)
	}
	slices.Sort(words)
	return slices.Compact(words)
}

// The chat section of README.md and docs/zh/commands.md list the same
// commands, and those are the commands Parse knows.
func TestReadmesListTheSameCommands(t *testing.T) {
	var want []string
	for _, c := range Commands {
		want = append(want, c.Chinese, "/"+c.Name)
		for _, a := range c.Aliases {
			want = append(want, "/"+a)
		}
	}
	slices.Sort(want)
	en := readmeCommands(t, "README.md", "## Chat commands")
	zh := readmeCommands(t, "docs/zh/commands.md", "## 聊天命令")
	if !slices.Equal(en, want) {
		t.Errorf("README.md lists %q,\nthe commands are %q", en, want)
	}
	if !slices.Equal(zh, want) {
		t.Errorf("docs/zh/commands.md lists %q,\nthe commands are %q", zh, want)
	}
	top, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if head, _, _ := strings.Cut(string(top), "\n## "); !strings.Contains(head, "(README.zh-CN.md)") {
		t.Error("README.md does not link README.zh-CN.md before its first section")
	}
}
