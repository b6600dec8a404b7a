// Package agent is the protocol between a hub (the trainbot the chats talk
// to) and the trainbot of another host it starts runs on: `trainbot agent`,
// run by the hub in a session of its SSH connection to the host, reads
// requests on its stdin and answers on its stdout. Serve is the host's
// side (it starts runs there with trainer.StartHere, under the host's own
// locks; the runs' shims owe nothing to the session), Link the hub's (a
// trainer.RemoteHost over a hosts.Host, with one agent session per
// connection, started again after a loss).
//
// The wire: each request is one JSON line with an id; each answer one
// JSON line with the same id, followed, when it carries file bytes, by
// exactly n raw bytes (deflated when z is set). Requests are answered in
// any order. The hello comes first and carries the protocol version
// (hosts.Protocol); a host that speaks another answers it with its own
// version, and the hub refuses it with both named.
package agent

import (
	"time"

	"github.com/trainbot/trainbot/hosts"
	"github.com/trainbot/trainbot/trainer"
)

// Operations.
const (
	opHello  = "hello"
	opStart  = "start"
	opStatus = "status"
	opStop   = "stop"
	opRead   = "read"
	// opCheckpoint: the newest complete checkpoint (File: the pattern,
	// Dir: the job's directory); answered in Checkpoint.
	opCheckpoint = "checkpoint"
)

// GPUSettings are the hub's [gpu] rules, which the host's trainbot claims
// its GPUs by.
type GPUSettings struct {
	Interval   time.Duration `json:"interval"`
	BusyMemory int64         `json:"busy_memory"`
	BusyUtil   int           `json:"busy_util"`
	FreeFor    time.Duration `json:"free_for"`
	Visible    string        `json:"visible"`
	LockDir    string        `json:"lock_dir"`
}

// Hello is the hub's first request.
type Hello struct {
	Protocol int         `json:"protocol"`
	Hub      string      `json:"hub"`
	GPU      GPUSettings `json:"gpu"`
}

// HelloReply is the host's answer to it.
type HelloReply struct {
	Version hosts.Version `json:"version"`
	DataDir string        `json:"data_dir"`
	// NoGPU says why the host's trainbot sees no GPU ("" when it does).
	NoGPU string `json:"no_gpu,omitempty"`
}

type request struct {
	ID    uint64              `json:"id"`
	Op    string              `json:"op"`
	Hello *Hello              `json:"hello,omitempty"`
	Start *trainer.RemoteSpec `json:"start,omitempty"`
	Ref   *trainer.RemoteRef  `json:"ref,omitempty"`
	Stop  *trainer.RemoteStop `json:"stop,omitempty"`
	File  string              `json:"file,omitempty"`
	Dir   string              `json:"dir,omitempty"`
	Off   int64               `json:"off,omitempty"`
	Max   int                 `json:"max,omitempty"`
}

// Kinds of errors, so that the hub tells them apart as the host did.
const (
	kindBusy       = "busy"        // the job's lock is held there
	kindGPUs       = "gpus"        // not enough free GPUs there now
	kindNoGPUs     = "no_gpus"     // never enough GPUs there
	kindNotStarted = "not_started" // the run's command could not be started
	kindProtocol   = "protocol"    // the hello's protocol is not the host's
)

type response struct {
	ID      uint64                 `json:"id"`
	Error   string                 `json:"error,omitempty"`
	Kind    string                 `json:"kind,omitempty"`
	Hello   *HelloReply            `json:"hello,omitempty"`
	Started *trainer.RemoteStarted `json:"started,omitempty"`
	Status  *trainer.RemoteStatus  `json:"status,omitempty"`
	// Checkpoint answers opCheckpoint ("" for none).
	Checkpoint string `json:"checkpoint,omitempty"`
	// N raw bytes follow the line; Z: they are deflated (raw DEFLATE).
	N int  `json:"n,omitempty"`
	Z bool `json:"z,omitempty"`
}

// Bounds of the wire.
const (
	maxLine = 1 << 20  // a request or answer line
	maxRead = 4 << 20  // the bytes one read may ask for
	maxData = 16 << 20 // the bytes that may follow an answer
	// compressFrom: shorter data goes as it is.
	compressFrom = 512
)
