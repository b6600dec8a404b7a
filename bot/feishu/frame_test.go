package feishu

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

// sdkFrames reads testdata/sdk-frames.txt: frames the SDK (v3.4.22)
// marshalled, one "name hex" a line.
func sdkFrames(t testing.TB) map[string][]byte {
	t.Helper()
	raw, err := os.ReadFile("testdata/sdk-frames.txt")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for line := range strings.Lines(string(raw)) {
		name, h, _ := strings.Cut(strings.TrimSpace(line), " ")
		b, err := hex.DecodeString(h)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = b
	}
	return out
}

// The frames written here are the SDK's byte for byte, and the SDK's read
// back to the same fields.
func TestFramesAreTheSDKs(t *testing.T) {
	payload := []byte(`{"schema":"2.0","header":{"event_id":"ev1","event_type":"im.message.receive_v1"}}`)
	event := frame{SeqID: 3, Service: 7, Method: methodData, Payload: payload,
		Headers: []header{{"type", "event"}, {"message_id", "m1"}, {"sum", "1"}, {"seq", "0"}, {"trace_id", "tr"}}}
	ack := event
	ack.Headers = append(append([]header{}, event.Headers...), header{headerBizRt, "0"})
	ack.Payload, _ = json.Marshal(ackPayload{StatusCode: 200, Data: []byte(`{"toast":{"type":"info","content":"状态"}}`)})
	want := map[string]*frame{
		"ping":  pingFrame(7),
		"event": &event,
		"ack":   &ack,
		"full": {SeqID: 1 << 40, LogID: 300, Service: 1 << 30, Method: 1, PayloadEncoding: "gzip", PayloadType: "json", Payload: []byte{}, LogIDNew: "log-1",
			Headers: []header{{"", ""}, {"k", strings.Repeat("v", 200)}}},
		"pong": {Service: 7, Headers: []header{{"type", "pong"}}, Payload: []byte(`{"PingInterval":30}`)},
	}
	sdk := sdkFrames(t)
	if len(sdk) != len(want) {
		t.Fatalf("%d SDK frames, want %d", len(sdk), len(want))
	}
	for name, f := range want {
		t.Run(name, func(t *testing.T) {
			if got := f.marshal(); !bytes.Equal(got, sdk[name]) {
				t.Errorf("marshal:\n got %x\nwant %x", got, sdk[name])
			}
			back, err := unmarshalFrame(sdk[name])
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(&back, f) {
				t.Errorf("unmarshal: got %+v, want %+v", back, *f)
			}
		})
	}
	if got := event.header("message_id"); got != "m1" {
		t.Errorf("header message_id: got %q", got)
	}
	if got := event.headerInt("sum"); got != 1 {
		t.Errorf("headerInt sum: got %d", got)
	}
}

func TestBadFramesAreRefused(t *testing.T) {
	good := pingFrame(7).marshal()
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"truncated", good[:len(good)-3]},
		{"no method", (&frame{Service: 7}).marshal()[:6]},
		{"service as bytes", []byte{0x08, 0, 0x10, 0, 0x1a, 1, 'x', 0x20, 0}},
		{"header without value", append(append([]byte{}, good[:8]...), 0x2a, 3, 0x0a, 1, 'k')},
		{"bad tag", []byte{0xff}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := unmarshalFrame(c.b); !errors.Is(err, errFrame) {
				t.Errorf("got %v, want errFrame", err)
			}
		})
	}
	// An unknown field is skipped.
	b := append(append([]byte{}, good...), 0x50, 1) // field 10, varint 1
	if f, err := unmarshalFrame(b); err != nil || f.Service != 7 {
		t.Errorf("with an unknown field: %+v, %v", f, err)
	}
}

func FuzzUnmarshalFrame(f *testing.F) {
	for _, b := range sdkFrames(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := unmarshalFrame(b)
		if err != nil {
			return
		}
		again, err := unmarshalFrame(fr.marshal())
		if err != nil || !reflect.DeepEqual(again, fr) {
			t.Fatalf("a frame read back differs: %+v, %v", again, err)
		}
	})
}
