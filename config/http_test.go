package config

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestHTTPConfig(t *testing.T) {
	if DefaultConfig().HTTP.Listen != "" {
		t.Error("[http] must be off by default")
	}
	if c := parseExample(t); c.HTTP.Listen != "" {
		t.Errorf("the example turns [http] on: %q", c.HTTP.Listen)
	}
	for _, tc := range []struct{ toml, err string }{
		{`listen = "127.0.0.1:9464"`, ""},
		{`listen = ":9464"`, ""},
		{`listen = "[::1]:0"`, ""},
		{`listen = "9464"`, `http.listen: want host:port such as "127.0.0.1:9464"`},
		{`listen = "localhost:http"`, "http.listen"},
		{`listen = "127.0.0.1:99999"`, "http.listen"},
		{`public_url = "https://gpu.example.org/trainbot"`, ""},
		{`public_url = "http://127.0.0.1:9464"`, ""},
		{`public_url = "gpu.example.org"`, "http.public_url"},
		{`public_url = "ftp://x/"`, "http.public_url"},
		{`public_url = "https://x/?a=1"`, "http.public_url"},
		{`link_ttl = "12h"`, ""},
		{`link_ttl = "0s"`, "http.link_ttl"},
		{`max_connections = 64`, ""},
		{`max_connections = 0`, "t.toml:2: http.max_connections: want a number of connections from 1 to 65536, got 0"},
		{`max_connections = 100000`, "http.max_connections"},
	} {
		c := DefaultConfig()
		if err := c.Parse("t.toml", strings.NewReader("[http]\n"+tc.toml+"\n")); err != nil {
			t.Fatal(err)
		}
		err := c.Validate()
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.toml, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one with %q", tc.toml, err, tc.err)
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

func TestHTTPLinks(t *testing.T) {
	if got := DefaultConfig().HTTP.LinkTTL; got != DefaultLinkTTL || time.Duration(got) != 7*24*time.Hour {
		t.Errorf("link_ttl default %v, want 7 days", time.Duration(got))
	}
	if c := parseExample(t); c.HTTP.LinkTTL != DefaultLinkTTL || c.HTTP.PublicURL != "" {
		t.Errorf("the example: link_ttl %v, public_url %q; want 7 days and none", time.Duration(c.HTTP.LinkTTL), c.HTTP.PublicURL)
	}
	if got := DefaultConfig().HTTP.MaxConnections; got != DefaultMaxConnections {
		t.Errorf("max_connections default %d, want %d", got, DefaultMaxConnections)
	}
	if c := parseExample(t); c.HTTP.MaxConnections != DefaultMaxConnections {
		t.Errorf("the example: max_connections %d, want the default %d", c.HTTP.MaxConnections, DefaultMaxConnections)
	}
}
