package config

import (
	"strings"
	"testing"
)

func TestMCPSection(t *testing.T) {
	cfg, err := parse(t, "[mcp]\nallow_control = true\n")
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.MCP.AllowControl {
		t.Error("allow_control = true not read")
	}
	cfg, err = parse(t, "log_level = \"info\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MCP.AllowControl {
		t.Error("control is allowed by default")
	}
	for doc, want := range map[string]string{
		"[mcp]\nallow_contorl = true\n":    `test.toml:2: mcp.allow_contorl: unknown key (did you mean "allow_control"?)`,
		"[mcp]\nallow_control = \"yes\"\n": `test.toml:2: mcp.allow_control: want`,
	} {
		_, err := parse(t, doc)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", doc, err, want)
		}
	}
}
