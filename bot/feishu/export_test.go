package feishu

// Frame is the long connection's frame, for the test fake.
type (
	Frame  = frame
	Header = header
)

// MarshalFrame and UnmarshalFrame are the frame's codec (frame_test.go
// pins it to the SDK's bytes), for the test fake.
func MarshalFrame(f *Frame) []byte           { return f.marshal() }
func UnmarshalFrame(b []byte) (Frame, error) { return unmarshalFrame(b) }

// HeaderOf returns a frame's header.
func HeaderOf(f *Frame, key string) string { return f.header(key) }
