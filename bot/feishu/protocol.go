package feishu

// Feishu's long connection and event payloads, written against the
// protocol as github.com/larksuite/oapi-sdk-go/v3 v3.4.22 (package ws,
// event/dispatcher) implements it, without the SDK: linking its lark
// client pulled ~120 service packages into the binary to use a handful of
// identifiers.
//
// What the protocol requires:
//   - Discovery: POST {domain}/callback/ws/endpoint with the JSON body
//     {"AppID":…,"AppSecret":…} (capitalised keys) answers {code, msg,
//     data:{URL, ClientConfig:{PingInterval, ReconnectCount,
//     ReconnectInterval, ReconnectNonce}}}, the intervals in seconds. Code
//     1 (busy) and 1000040343 (internal error) are passing; any other
//     non-zero code refuses the app. The URL carries device_id, service_id
//     and a ticket in its query.
//   - A refused WebSocket handshake says why in the response headers
//     Handshake-Status (403: forbidden, 514: auth failed), Handshake-Msg and
//     Handshake-Autherrcode (1000040350: too many connections).
//   - Every WebSocket message is binary: one protobuf (proto2) Frame of the
//     pbbp2 schema: 1 SeqID, 2 LogID (uint64), 3 service, 4 method (int32),
//     all four required; 5 repeated headers (key 1, value 2, both required
//     strings); 6 payload_encoding, 7 payload_type, 8 payload (bytes),
//     9 LogIDNew. The SDK writes every field but payload even when zero,
//     in field order; marshal does the same, byte for byte
//     (testdata/sdk-frames.txt was written by the SDK).
//   - method 0 is a control frame (headers type=ping or pong), 1 a data
//     frame. The client pings every PingInterval with method 0,
//     service=<service_id of the URL> and type=ping; a pong's payload may
//     carry a new ClientConfig as JSON.
//   - A data frame's type header is "event" (an event or a callback, the
//     payload its JSON) or "card" (the old card callbacks, never answered).
//     A payload may come split: headers sum (parts) and seq (0-based) under
//     one message_id; the parts are joined in seq order (the SDK keeps them
//     5 s).
//   - The ack is the same frame sent back (its SeqID, service, headers and
//     message_id) plus a biz_rt header (handling time in ms), its payload
//     the JSON {"code":200|500,"headers":null,"data":<base64 of the
//     handler's JSON answer>}. A callback's answer (card.action.trigger) is
//     {"toast":{"type":"info","content":…}}, shown to the clicker only.
//     Without an ack within 3 s Feishu pushes the event again.
//   - An event payload is schema 2.0 JSON: header.event_type names it,
//     header.event_id identifies it; an "encrypt" field means the app set an
//     Encrypt Key, which the long connection does not need.
//
// The SDK's traps avoided here (its ws.Client is not used at all):
// Client.Start blocks forever and ignores its context; it reads and writes
// its connection and its server-set intervals without a lock (races under
// -race once it reconnects); it asks for the endpoint with
// http.DefaultClient (no timeout) and dials without a handshake timeout;
// it logs the endpoint URL with its ticket; it acks an event only after
// the handler returns, so a slow handler makes Feishu push it again; it
// never times out a missing pong, so a dead link is noticed only when a
// read fails (here a read deadline of two ping intervals); and with a zero
// PingInterval its ping loop spins (here the default of 2 minutes stays).

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
)

// The long connection's discovery and handshake.
const (
	endpointPath   = "/callback/ws/endpoint"
	queryServiceID = "service_id"

	headerHandshakeStatus      = "Handshake-Status"
	headerHandshakeMsg         = "Handshake-Msg"
	headerHandshakeAuthErrCode = "Handshake-Autherrcode"

	endpointOK            = 0
	endpointBusy          = 1
	endpointInternalError = 1000040343
	handshakeForbidden    = 403
	handshakeExceedLimit  = 1000040350
)

// Frame methods and the headers of a frame.
const (
	methodControl = 0
	methodData    = 1

	headerType      = "type"
	headerMessageID = "message_id"
	headerSum       = "sum"
	headerSeq       = "seq"
	headerBizRt     = "biz_rt"

	typePing  = "ping"
	typePong  = "pong"
	typeEvent = "event"
)

// Field numbers of pbbp2.proto.
const (
	fieldSeqID           = 1
	fieldLogID           = 2
	fieldService         = 3
	fieldMethod          = 4
	fieldHeaders         = 5
	fieldPayloadEncoding = 6
	fieldPayloadType     = 7
	fieldPayload         = 8
	fieldLogIDNew        = 9

	fieldHeaderKey   = 1
	fieldHeaderValue = 2
)

// header is a Frame's key/value header.
type header struct{ Key, Value string }

// frame is pbbp2's Frame, every message of the long connection.
type frame struct {
	SeqID, LogID    uint64
	Service, Method int32
	Headers         []header
	PayloadEncoding string
	PayloadType     string
	Payload         []byte // nil: not written
	LogIDNew        string
}

// marshal encodes f as the SDK does: every field in order, zero or not,
// but a nil payload.
func (f *frame) marshal() []byte {
	var b []byte
	b = protowire.AppendTag(b, fieldSeqID, protowire.VarintType)
	b = protowire.AppendVarint(b, f.SeqID)
	b = protowire.AppendTag(b, fieldLogID, protowire.VarintType)
	b = protowire.AppendVarint(b, f.LogID)
	b = protowire.AppendTag(b, fieldService, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(f.Service)) // int32: negative as 10 bytes
	b = protowire.AppendTag(b, fieldMethod, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(f.Method))
	for _, h := range f.Headers {
		var hb []byte
		hb = protowire.AppendTag(hb, fieldHeaderKey, protowire.BytesType)
		hb = protowire.AppendString(hb, h.Key)
		hb = protowire.AppendTag(hb, fieldHeaderValue, protowire.BytesType)
		hb = protowire.AppendString(hb, h.Value)
		b = protowire.AppendTag(b, fieldHeaders, protowire.BytesType)
		b = protowire.AppendBytes(b, hb)
	}
	b = protowire.AppendTag(b, fieldPayloadEncoding, protowire.BytesType)
	b = protowire.AppendString(b, f.PayloadEncoding)
	b = protowire.AppendTag(b, fieldPayloadType, protowire.BytesType)
	b = protowire.AppendString(b, f.PayloadType)
	if f.Payload != nil {
		b = protowire.AppendTag(b, fieldPayload, protowire.BytesType)
		b = protowire.AppendBytes(b, f.Payload)
	}
	b = protowire.AppendTag(b, fieldLogIDNew, protowire.BytesType)
	b = protowire.AppendString(b, f.LogIDNew)
	return b
}

var errFrame = errors.New("feishu: bad frame")

// unmarshalFrame decodes a Frame. Like the SDK it refuses a frame without
// one of its four required fields or a header without its key or value,
// and skips fields it does not know.
func unmarshalFrame(b []byte) (frame, error) {
	var f frame
	var have uint
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		want := protowire.BytesType
		if num >= fieldSeqID && num <= fieldMethod {
			want = protowire.VarintType
		}
		if num <= fieldLogIDNew && typ != want {
			return fmt.Errorf("%w: field %d has wire type %d", errFrame, num, typ)
		}
		switch num {
		case fieldSeqID:
			f.SeqID, have = x, have|1
		case fieldLogID:
			f.LogID, have = x, have|2
		case fieldService:
			f.Service, have = int32(x), have|4
		case fieldMethod:
			f.Method, have = int32(x), have|8
		case fieldHeaders:
			h, err := unmarshalHeader(v)
			if err != nil {
				return err
			}
			f.Headers = append(f.Headers, h)
		case fieldPayloadEncoding:
			f.PayloadEncoding = string(v)
		case fieldPayloadType:
			f.PayloadType = string(v)
		case fieldPayload:
			f.Payload = append([]byte{}, v...)
		case fieldLogIDNew:
			f.LogIDNew = string(v)
		}
		return nil
	})
	if err != nil {
		return frame{}, err
	}
	if have != 15 {
		return frame{}, fmt.Errorf("%w: a required field is missing", errFrame)
	}
	return f, nil
}

func unmarshalHeader(b []byte) (header, error) {
	var h header
	var have uint
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num > fieldHeaderValue {
			return nil
		}
		if typ != protowire.BytesType {
			return fmt.Errorf("%w: header field %d has wire type %d", errFrame, num, typ)
		}
		if num == fieldHeaderKey {
			h.Key, have = string(v), have|1
		} else {
			h.Value, have = string(v), have|2
		}
		return nil
	})
	if err == nil && have != 3 {
		err = fmt.Errorf("%w: a header without its key or value", errFrame)
	}
	return h, err
}

// fields calls f with each field of a message: a varint's value in x, a
// length-delimited field's bytes in v.
func fields(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %w", errFrame, protowire.ParseError(n))
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("%w: %w", errFrame, protowire.ParseError(n))
		}
		b = b[n:]
		if err := f(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

// header returns the value of a header ("" without it).
func (f *frame) header(key string) string {
	for _, h := range f.Headers {
		if h.Key == key {
			return h.Value
		}
	}
	return ""
}

// headerInt returns a header as a number (0 without one).
func (f *frame) headerInt(key string) int {
	for _, h := range f.Headers {
		if h.Key == key {
			if n, err := strconv.Atoi(h.Value); err == nil {
				return n
			}
		}
	}
	return 0
}

// pingFrame is the control frame sent every PingInterval.
func pingFrame(service int32) *frame {
	return &frame{Method: methodControl, Service: service, Headers: []header{{headerType, typePing}}}
}

// endpointAnswer is the answer of the discovery.
type endpointAnswer struct {
	Code int    `json:"code"`
	Msg  string `json:"msg"`
	Data *struct {
		URL          string        `json:"URL"`
		ClientConfig *clientConfig `json:"ClientConfig"`
	} `json:"data"`
}

// clientConfig is the server's settings for the client, in the discovery's
// answer and in pongs. Only the ping interval is used: the reconnect
// settings are trainbot's own (inbound.Loop's capped backoff).
type clientConfig struct {
	PingInterval int `json:"PingInterval"` // seconds
}

// ackPayload is the payload of an event's ack.
type ackPayload struct {
	StatusCode int               `json:"code"`
	Headers    map[string]string `json:"headers"`
	Data       []byte            `json:"data"`
}

// envelope is what an event payload carries, the event itself left raw.
type envelope struct {
	Encrypt string `json:"encrypt"`
	Header  *struct {
		EventID   string `json:"event_id"`
		EventType string `json:"event_type"`
	} `json:"header"`
	Event json.RawMessage `json:"event"`
}

// eventType is the type of a schema 2.0 event, or of a schema 1.0 one
// (event.type), as the SDK's dispatcher reads it.
func (e *envelope) eventType() string {
	if e.Header != nil {
		return e.Header.EventType
	}
	var v1 struct {
		Type any `json:"type"`
	}
	if json.Unmarshal(e.Event, &v1) == nil {
		if s, ok := v1.Type.(string); ok {
			return s
		}
	}
	return ""
}

// messageEvent is the event of im.message.receive_v1.
type messageEvent struct {
	Sender struct {
		SenderID struct {
			OpenID string `json:"open_id"`
		} `json:"sender_id"`
	} `json:"sender"`
	Message struct {
		MessageID   string `json:"message_id"`
		ChatID      string `json:"chat_id"`
		ChatType    string `json:"chat_type"`
		MessageType string `json:"message_type"`
		Content     string `json:"content"` // JSON: {"text":…} for text
	} `json:"message"`
}

// clickEvent is the event of the card.action.trigger callback.
type clickEvent struct {
	Operator struct {
		OpenID string `json:"open_id"`
	} `json:"operator"`
	Action struct {
		Value map[string]any `json:"value"`
	} `json:"action"`
	Context struct {
		OpenChatID string `json:"open_chat_id"`
	} `json:"context"`
}

// clickAnswer is a card.action.trigger callback's answer.
type clickAnswer struct {
	Toast *toast `json:"toast,omitempty"`
}

type toast struct {
	Type    string `json:"type,omitempty"`
	Content string `json:"content,omitempty"`
}
