package config

import (
	"os"
	"strings"
	"testing"
)

func TestHTTPConfig(t *testing.T) {
	if DefaultConfig().HTTP.Listen != "" {
		t.Error("[http] must be off by default")
	}
	if c := parseExample(t); c.HTTP.Listen != "" {
		t.Errorf("the example turns [http] on: %q", c.HTTP.Listen)
	}
	for _, tc := range []struct{ listen, err string }{
		{"127.0.0.1:9464", ""},
		{":9464", ""},
		{"[::1]:0", ""},
		{"9464", `http.listen: want host:port such as "127.0.0.1:9464"`},
		{"localhost:http", "http.listen"},
		{"127.0.0.1:99999", "http.listen"},
	} {
		c := DefaultConfig()
		if err := c.Parse("t.toml", strings.NewReader("[http]\nlisten = \""+tc.listen+"\"\n")); err != nil {
			t.Fatal(err)
		}
		err := c.Validate()
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("listen %q: %v", tc.listen, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("listen %q: error %v, want one with %q", tc.listen, err, tc.err)
		}
	}
}

// parseExample parses config.example.toml over the defaults (not
// validated: each test checks what it is about).
func parseExample(t *testing.T) *Config {
	t.Helper()
	f, err := os.Open("../config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := DefaultConfig()
	if err := c.Parse("config.example.toml", f); err != nil {
		t.Fatal(err)
	}
	return c
}
