package config

import (
	"strings"
	"testing"
	"time"
)

// exampleSection is a section as a transport's package declares one.
type exampleSection struct {
	Token    string   `toml:"token"`
	TokenEnv string   `toml:"token_env"`
	Limit    int      `toml:"limit"`
	Every    Duration `toml:"every"`
	URL      string   `toml:"url"`
}

func (s *exampleSection) Check(ck *Checker) {
	ck.Secret("token", &s.Token, "token_env", s.TokenEnv)
	ck.Need(s.URL != "", [2]string{"url", s.URL}, [2]string{"token", s.Token})
	if s.URL != "" {
		ck.BaseURL("url", s.URL, "https")
	}
	if s.Limit < 0 {
		ck.Errorf("limit", "want 0 or more, got %d", s.Limit)
	}
	if s.Every != 0 {
		ck.LegacyProgressInterval(time.Duration(s.Every))
	}
}

func (s *exampleSection) Secrets() []string { return []string{"token"} }
func (s *exampleSection) MemberIDs() string { return "an example id" }

// parseWith parses doc with [example] declared (limit 7 by default).
func parseWith(t *testing.T, doc string) (*Config, error) {
	t.Helper()
	c := DefaultConfig()
	c.Declare("example", &exampleSection{Limit: 7})
	if err := c.Parse("test.toml", strings.NewReader(doc)); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// A declared section is decoded, checked, read from the environment and
// reported at its keys and lines like the built-in ones; its [auth] lists
// are the config's members.
func TestDeclaredSection(t *testing.T) {
	withEnv(t, map[string]string{"EXAMPLE_TOKEN_VAR": "t0k"})
	c, err := parseWith(t, `
[example]
url = "https://example.org"
token_env = "EXAMPLE_TOKEN_VAR"
every = "30s"
[auth]
example_operators = ["ana"]
example_viewers = ["bo", "ana"]
`)
	if err != nil {
		t.Fatal(err)
	}
	s := c.Section("example").(*exampleSection)
	if s.Token != "t0k" || s.Limit != 7 || s.URL != "https://example.org" {
		t.Errorf("section %+v", s)
	}
	if m := c.Members("example"); len(m.Operators) != 1 || m.Operators[0] != "ana" || len(m.Viewers) != 2 {
		t.Errorf("members %+v", m)
	}
	if c.ProgressInterval() != 30*time.Second {
		t.Errorf("the legacy progress interval: %v", c.ProgressInterval())
	}
	if got := c.Sections(); len(got) != 1 || got[0] != "example" {
		t.Errorf("sections %q", got)
	}
	if err := c.ApplyEnv([]string{"TRAINBOT_EXAMPLE_LIMIT=3"}); err != nil || s.Limit != 3 {
		t.Errorf("TRAINBOT_EXAMPLE_LIMIT: %v, limit %d", err, s.Limit)
	}

	for _, tc := range []struct{ doc, want string }{
		{"[example]\nlimit = \"many\"", "test.toml:2: example.limit: want an integer, got string \"many\""},
		{"[example]\nlimt = 3", `test.toml:2: example.limt: unknown key (did you mean "limit"?)`},
		{"[example]\nlimit = -1", "test.toml:2: example.limit: want 0 or more, got -1"},
		{"[example]\nurl = \"ftp://x\"\ntoken = \"SECRET\"", `test.toml:2: example.url: want a URL like https://host, got "ftp://x"`},
		{"[example]\nurl = \"https://x\"", "test.toml:1: example: [example] needs token"},
		{"[example]\ntoken = \"SECRET\"", "example.token: token is set but url is not"},
		{"[example]\ntoken = \"SECRET\"\ntoken_env = \"V\"\nurl = \"https://x\"", "give only one of token, token_env"},
		{"[example]\ntoken_env = \"NOPE_UNSET\"\nurl = \"https://x\"", "token_env: the environment variable NOPE_UNSET is not set"},
		{"[auth]\nexample_viewrs = [\"x\"]", `auth.example_viewrs: unknown key (did you mean "example_viewers"?)`},
		{"[auth]\nexample_operators = [\"a b\"]", `auth.example_operators: "a b" is not a user id (the bot tells a stranger their id: an example id)`},
		{"[auth]\nexample_operators = \"ana\"", "auth.example_operators: want an array"},
	} {
		_, err := parseWith(t, tc.doc)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.doc, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%q: a secret is in the error: %v", tc.doc, err)
		}
	}
	// Undeclared, it is an unknown key like any other.
	if _, err := parse(t, "[example]\nlimit = 3\n"); err == nil || !strings.Contains(err.Error(), "test.toml:1: example: unknown key") {
		t.Errorf("an undeclared section: %v", err)
	}
}

func TestDeclareTwicePanics(t *testing.T) {
	for _, name := range []string{"example", "http"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("declaring %q again did not panic", name)
				}
			}()
			c := DefaultConfig()
			c.Declare("example", &exampleSection{})
			c.Declare(name, &exampleSection{})
		}()
	}
}
