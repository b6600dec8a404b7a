package tfevents

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// Scalar is one scalar summary value of an event.
type Scalar struct {
	Tag      string  // the summary's tag ("loss", "Loss/train"), as written
	Step     int64   // the event's step
	WallTime float64 // the event's wall_time: seconds since the Unix epoch
	Value    float64 // NaN and ±Inf as written
}

// Field numbers of tensorflow/core/util/event.proto, summary.proto,
// tensor.proto and tensor_shape.proto.
const (
	eventWallTime = 1 // double
	eventStep     = 2 // int64
	eventSummary  = 5 // Summary

	summaryValue = 1 // repeated Summary.Value

	valueTag      = 1 // string
	valueSimple   = 2 // float
	valueNodeName = 7 // string (TF1, when tag is empty)
	valueTensor   = 8 // TensorProto
	valueMetadata = 9 // SummaryMetadata

	metadataPluginData = 1 // SummaryMetadata.PluginData
	pluginName         = 1 // string

	tensorDtype   = 1  // DataType
	tensorShape   = 2  // TensorShapeProto
	tensorContent = 4  // bytes, little-endian
	tensorFloat   = 5  // repeated float
	tensorDouble  = 6  // repeated double
	tensorInt     = 7  // repeated int32
	tensorInt64   = 10 // repeated int64
	tensorBool    = 11 // repeated bool
	tensorHalf    = 13 // repeated int32 holding float16 or bfloat16 bits

	shapeDim = 2 // repeated Dim
	dimSize  = 1 // int64
)

// DataType values of tensorflow/core/framework/types.proto that a scalar
// can have.
const (
	dtFloat    = 1
	dtDouble   = 2
	dtInt32    = 3
	dtUint8    = 4
	dtInt16    = 5
	dtInt8     = 6
	dtInt64    = 9
	dtBool     = 10
	dtBfloat16 = 14
	dtUint16   = 17
	dtHalf     = 19
	dtUint32   = 22
	dtUint64   = 23
)

// ScalarsPlugin is the plugin name of scalar summaries (TF2, PyTorch's
// new_style): a tag whose metadata names another plugin (text, hparams,
// histograms …) holds no scalars, whatever its tensors' shape.
const ScalarsPlugin = "scalars"

// Plugins remembers the plugin of each tag: TF2 writes a tag's metadata in
// its first summary only.
type Plugins map[string]string

// errTruncated is a field that runs past the end of its message.
var errTruncated = errors.New("truncated protobuf field")

// DecodeEvent reads one record's Event and returns its scalar values
// (none for the file_version event, graphs, images, histograms …). Tags
// whose metadata names a plugin other than scalars are left out; plugins
// keeps what the record said of its tags.
func DecodeEvent(b []byte, plugins Plugins) ([]Scalar, error) {
	var wall float64
	var step int64
	var summaries [][]byte
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == eventWallTime && typ == protowire.Fixed64Type:
			wall = math.Float64frombits(x)
		case num == eventStep && typ == protowire.VarintType:
			step = int64(x)
		case num == eventSummary && typ == protowire.BytesType:
			summaries = append(summaries, v)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("event: %w", err)
	}
	var out []Scalar
	for _, s := range summaries {
		err := fields(s, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
			if num != summaryValue || typ != protowire.BytesType {
				return nil
			}
			tag, value, ok, err := decodeValue(v, plugins)
			if err != nil || !ok {
				return err
			}
			out = append(out, Scalar{Tag: tag, Step: step, WallTime: wall, Value: value})
			return nil
		})
		if err != nil {
			return out, fmt.Errorf("summary: %w", err)
		}
	}
	return out, nil
}

// decodeValue reads a Summary.Value: ok when it is a scalar.
func decodeValue(b []byte, plugins Plugins) (tag string, value float64, ok bool, err error) {
	var node, plugin string
	var simple *float64
	var tensor []byte
	err = fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == valueTag && typ == protowire.BytesType:
			tag = string(v)
		case num == valueNodeName && typ == protowire.BytesType:
			node = string(v)
		case num == valueSimple && typ == protowire.Fixed32Type:
			f := float64(math.Float32frombits(uint32(x)))
			simple = &f
		case num == valueTensor && typ == protowire.BytesType:
			tensor = v
		case num == valueMetadata && typ == protowire.BytesType:
			return fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				if num == metadataPluginData && typ == protowire.BytesType {
					return fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
						if num == pluginName && typ == protowire.BytesType {
							plugin = string(v)
						}
						return nil
					})
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return "", 0, false, fmt.Errorf("value: %w", err)
	}
	if tag == "" {
		tag = node
	}
	if tag == "" {
		return "", 0, false, nil
	}
	if plugin != "" {
		plugins[tag] = plugin
	}
	if simple != nil {
		return tag, *simple, true, nil
	}
	if tensor == nil {
		return tag, 0, false, nil
	}
	if p, known := plugins[tag]; known && p != ScalarsPlugin {
		return tag, 0, false, nil
	}
	value, ok, err = tensorScalar(tensor)
	if err != nil {
		return "", 0, false, fmt.Errorf("tensor of %q: %w", tag, err)
	}
	return tag, value, ok, nil
}

// tensorScalar reads a TensorProto that holds one number: its shape has
// no dimension (or only dimensions of size 1), and its value is in
// tensor_content or in the typed repeated field of its dtype.
func tensorScalar(b []byte) (float64, bool, error) {
	var dtype uint64
	var content []byte
	elems := int64(1)
	var vals []float64 // of the typed fields, in order
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch num {
		case tensorDtype:
			dtype = x
		case tensorShape:
			if typ != protowire.BytesType {
				return nil
			}
			return fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				if num != shapeDim || typ != protowire.BytesType {
					return nil
				}
				size := int64(-1)
				if err := fields(v, func(num protowire.Number, typ protowire.Type, _ []byte, x uint64) error {
					if num == dimSize && typ == protowire.VarintType {
						size = int64(x)
					}
					return nil
				}); err != nil {
					return err
				}
				if size < 0 { // unknown: not a scalar
					size = 2
				}
				elems *= size
				return nil
			})
		case tensorContent:
			content = v
		case tensorFloat, tensorDouble, tensorInt, tensorInt64, tensorBool, tensorHalf:
			return repeated(num, typ, v, x, func(x uint64) { vals = append(vals, typedValue(num, dtype, x)) })
		}
		return nil
	})
	if err != nil || elems != 1 {
		return 0, false, err
	}
	if content != nil {
		return contentValue(dtype, content)
	}
	if len(vals) != 1 {
		return 0, false, nil
	}
	return vals[0], true, nil
}

// repeated calls f with each element of a repeated scalar field, packed
// (one BytesType field) or not (one field per element).
func repeated(num protowire.Number, typ protowire.Type, v []byte, x uint64, f func(uint64)) error {
	if typ != protowire.BytesType {
		f(x)
		return nil
	}
	for len(v) > 0 {
		var n int
		switch num {
		case tensorFloat:
			var u uint32
			u, n = protowire.ConsumeFixed32(v)
			x = uint64(u)
		case tensorDouble:
			x, n = protowire.ConsumeFixed64(v)
		default:
			x, n = protowire.ConsumeVarint(v)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		f(x)
		v = v[n:]
	}
	return nil
}

// typedValue is one element of a typed repeated field as a number.
func typedValue(num protowire.Number, dtype uint64, x uint64) float64 {
	switch num {
	case tensorFloat:
		return float64(math.Float32frombits(uint32(x)))
	case tensorDouble:
		return math.Float64frombits(x)
	case tensorHalf:
		if dtype == dtBfloat16 {
			return float64(math.Float32frombits(uint32(x) << 16))
		}
		return halfToFloat(uint16(x))
	case tensorBool:
		if x != 0 {
			return 1
		}
		return 0
	case tensorInt:
		return float64(int32(x))
	}
	return float64(int64(x))
}

// contentValue reads a one-element tensor_content of a numeric dtype.
func contentValue(dtype uint64, b []byte) (float64, bool, error) {
	le := binary.LittleEndian
	size := map[uint64]int{dtFloat: 4, dtDouble: 8, dtInt32: 4, dtUint8: 1, dtInt16: 2, dtInt8: 1, dtInt64: 8, dtBool: 1,
		dtBfloat16: 2, dtUint16: 2, dtHalf: 2, dtUint32: 4, dtUint64: 8}[dtype]
	if size == 0 {
		return 0, false, nil // a string, a complex number …
	}
	if len(b) != size {
		return 0, false, fmt.Errorf("tensor_content of %d bytes for one element of %d", len(b), size)
	}
	switch dtype {
	case dtFloat:
		return float64(math.Float32frombits(le.Uint32(b))), true, nil
	case dtDouble:
		return math.Float64frombits(le.Uint64(b)), true, nil
	case dtInt32:
		return float64(int32(le.Uint32(b))), true, nil
	case dtUint8, dtBool:
		return float64(b[0]), true, nil
	case dtInt8:
		return float64(int8(b[0])), true, nil
	case dtInt16:
		return float64(int16(le.Uint16(b))), true, nil
	case dtUint16:
		return float64(le.Uint16(b)), true, nil
	case dtInt64:
		return float64(int64(le.Uint64(b))), true, nil
	case dtUint32:
		return float64(le.Uint32(b)), true, nil
	case dtUint64:
		return float64(le.Uint64(b)), true, nil
	case dtBfloat16:
		return float64(math.Float32frombits(uint32(le.Uint16(b)) << 16)), true, nil
	case dtHalf:
		return halfToFloat(le.Uint16(b)), true, nil
	}
	return 0, false, nil
}

// halfToFloat converts IEEE 754 binary16 bits.
func halfToFloat(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	frac := float64(h & 0x3ff)
	switch exp {
	case 0:
		return sign * math.Ldexp(frac, -24) // subnormal
	case 0x1f:
		if frac != 0 {
			return math.NaN()
		}
		return math.Inf(int(sign))
	}
	return sign * math.Ldexp(1+frac/1024, exp-15)
}

// fields calls f with each field of a message: for a varint or fixed
// field its value x, for a length-delimited one its bytes v. Groups are
// skipped.
func fields(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var u uint32
			u, n = protowire.ConsumeFixed32(b)
			x = uint64(u)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			if err := protowire.ParseError(n); err != nil {
				return err
			}
			return errTruncated
		}
		b = b[n:]
		if typ == protowire.StartGroupType {
			continue
		}
		if err := f(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

// MetricName is the name trainbot records a tag under: lower case, as
// logparse names metrics, so that "Loss" of an event file and "loss" of
// the output are one metric; a file in a subdirectory of the followed
// directory (add_scalars, Lightning's version_N) prefixes its path.
func MetricName(sub, tag string) string {
	name := strings.ToLower(strings.TrimSpace(tag))
	if sub != "" && sub != "." {
		name = strings.ToLower(sub) + "/" + name
	}
	return name
}
