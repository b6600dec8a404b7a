// Package shim is the per-run supervisor: a small process ("trainbot shim")
// that owns one run for its whole life, so that the training never depends
// on the chat bot being alive, fast or healthy (the conmon /
// containerd-shim shape).
//
// The bot starts the shim with shimctl.Start; the shim, in its own session, takes
// over the job's lock and the run's GPU locks (internal/gpulock; it records
// the run's main process in them), sets PR_SET_CHILD_SUBREAPER, starts the job's
// command in a new process group, drains its stdout and stderr into
// RUN_DIR/output.log through a bounded in-memory buffer (the child never
// waits on the disk), appends (offset, time) records to output.idx, writes
// state.json atomically at the start, on a stop and at the end, answers
// requests on the unix socket ctl.sock, escalates a stop SIGINT → SIGTERM →
// SIGKILL to the process group and every descendant, and exits when every
// process of the run is gone. It has no database, no network and no parser.
//
// The contract between the bot and the shim (the files of a run
// directory, the spec, the state and the control protocol) is package
// shimctl. cmd/trainbot's main enters the shim with MainIfAsked, as test
// binaries that start runs do from TestMain; the package has no init.
package shim
