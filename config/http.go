package config

import (
	"net"
	"net/url"
	"strconv"
	"time"
)

// DefaultLinkTTL is how long a page link is valid by default.
const DefaultLinkTTL = Duration(7 * 24 * time.Hour)

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
