// Package trainbot is the repository's root: it carries the example
// config (config.example.toml) into the binary, for `trainbot init` to
// start a user's config from. The program is cmd/trainbot; the
// documentation is README.md and docs/.
package trainbot

import _ "embed" // the example config

// ExampleConfig is config.example.toml: every section and key, with its
// default and what it does.
//
//go:embed config.example.toml
var ExampleConfig string
