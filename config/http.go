package config

import (
	"net"
	"strconv"
)

// HTTPConfig is the [http] section: trainbot's HTTP endpoints, /metrics
// for Prometheus and /healthz.
type HTTPConfig struct {
	// Listen is the address to listen on, "127.0.0.1:9464"; "" (the
	// default) serves no HTTP at all.
	Listen string `toml:"listen"`
}

// validateHTTP checks the [http] section.
func (c *Config) validateHTTP() Errors {
	l := c.HTTP.Listen
	if l == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(l)
	if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 {
		return Errors{c.ErrorAt("http.listen", "want host:port such as \"127.0.0.1:9464\" (\":9464\" for every interface), got %q", l)}
	}
	return nil
}
