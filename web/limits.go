package web

import (
	"net/http"
	"time"
)

// The server's bounds. A request here is a GET without a body; the
// largest answers (a scrape, a chart's points) take well under the write
// timeout. The live streams (events) move their write deadline with each
// event and have no read deadline.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = time.Minute
	idleTimeout       = time.Minute
	maxHeaderBytes    = 16 << 10 // Go allows 4 KiB more
)

// noFraming forbids every answer to be shown in a frame of another site
// (clickjacking of the run pages): Content-Security-Policy
// frame-ancestors, and X-Frame-Options for the browsers before it. A
// handler that sets its own policy keeps frame-ancestors in it (guard).
func noFraming(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", frameAncestors)
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, r)
	})
}

const frameAncestors = "frame-ancestors 'none'"
