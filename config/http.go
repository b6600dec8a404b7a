package config

import (
	"net"
	"net/url"
	"strconv"
	"time"
)

// DefaultLinkTTL is how long a page link is valid by default.
const DefaultLinkTTL = Duration(7 * 24 * time.Hour)

// DefaultMaxConnections is how many HTTP connections trainbot keeps open
// at once by default; MaxMaxConnections is the most it may be set to.
const (
	DefaultMaxConnections = 256
	MaxMaxConnections     = 65536
)

// HTTPConfig is the [http] section: trainbot's HTTP endpoints, /metrics
// for Prometheus, /healthz and the token-guarded run pages.
type HTTPConfig struct {
	// Listen is the address to listen on, "127.0.0.1:9464"; "" (the
	// default) serves no HTTP at all.
	Listen string `toml:"listen"`
	// PublicURL is the address the page links use ("https://gpu.example.org/trainbot",
	// a tunnel's "http://127.0.0.1:9464"); "" sends no links to the chats.
	PublicURL string `toml:"public_url"`
	// LinkTTL is how long a page link is valid (default 7 days).
	LinkTTL Duration `toml:"link_ttl"`
	// MaxConnections caps the HTTP connections open at once (default
	// DefaultMaxConnections); the server lowers it further to a quarter of
	// the process's open-file limit, so that HTTP never takes the
	// descriptors the runs and the store need.
	MaxConnections int `toml:"max_connections"`
}

// validateHTTP checks the [http] section.
func (c *Config) validateHTTP() Errors {
	var errs Errors
	if c.HTTP.LinkTTL <= 0 {
		errs = append(errs, c.ErrorAt("http.link_ttl", "want a positive duration such as \"7d\" or \"12h\", got %q", time.Duration(c.HTTP.LinkTTL).String()))
	}
	if u := c.HTTP.PublicURL; u != "" {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || p.RawQuery != "" || p.Fragment != "" {
			errs = append(errs, c.ErrorAt("http.public_url", "want an http:// or https:// address without query, such as \"https://gpu.example.org/trainbot\", got %q", u))
		}
	}
	if n := c.HTTP.MaxConnections; n < 1 || n > MaxMaxConnections {
		errs = append(errs, c.ErrorAt("http.max_connections", "want a number of connections from 1 to %d, got %d", MaxMaxConnections, n))
	}
	l := c.HTTP.Listen
	if l == "" {
		return errs
	}
	_, port, err := net.SplitHostPort(l)
	if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 {
		errs = append(errs, c.ErrorAt("http.listen", "want host:port such as \"127.0.0.1:9464\" (\":9464\" for every interface), got %q", l))
	}
	return errs
}
