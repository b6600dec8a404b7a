// Package deps holds no code: its test checks that trainbot's
// dependencies point one way, downward (DESIGN.md, #29). It runs
// `go list -deps` on the rooms below cmd and fails naming a forbidden
// import path and the chain of imports that reaches it: the database
// (store, modernc.org/sqlite) and the supervisor process (trainer/shim)
// reached from the rooms that only read or write records through their own
// interfaces or only know runs, package testing reached from
// the release binary, anything but the standard library in the leaf
// package history.
package deps
