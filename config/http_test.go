package config

import (
	"strings"
	"testing"
	"time"
)

func TestHTTPConfig(t *testing.T) {
	if DefaultConfig().HTTP.Listen != "" {
		t.Error("[http] must be off by default")
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

func TestHTTPLinks(t *testing.T) {
	if got := DefaultConfig().HTTP.LinkTTL; got != DefaultLinkTTL || time.Duration(got) != 7*24*time.Hour {
		t.Errorf("link_ttl default %v, want 7 days", time.Duration(got))
	}
	if got := DefaultConfig().HTTP.MaxConnections; got != DefaultMaxConnections {
		t.Errorf("max_connections default %d, want %d", got, DefaultMaxConnections)
	}
}
