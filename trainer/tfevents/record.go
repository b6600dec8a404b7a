// Package tfevents reads TensorBoard event files (events.out.tfevents.*)
// as a metric source: the TFRecord framing with its masked CRC32C checks,
// the Event protos inside, and of those the scalar summaries — a Summary
// value's simple_value (TF1, PyTorch's SummaryWriter) or a one-element
// numeric tensor (TF2's tf.summary.scalar, PyTorch's new_style) — as
// points with their step and wall time.
//
// Reading is split from following, as in trainer/logparse: Frames and
// DecodeEvent are pure and take bytes; File reads one file by offset as it
// grows (a torn last record is left for the next read, a corrupt one is
// skipped); Dir follows a directory's event files, several of them and
// new ones as they appear.
//
// The protos are decoded with google.golang.org/protobuf's protowire, not
// with types generated from TensorBoard's .proto files: trainbot reads
// about fifteen fields of five messages (Event, Summary, Summary.Value,
// SummaryMetadata, TensorProto), TensorBoard publishes no Go module of its
// protos, and generating them would vendor protoc output of tensorflow's
// package tree for that. protowire decodes the wire format exactly, skips
// every field trainbot does not read (images, histograms, graphs) without
// knowing its type, and keeps the reader free of reflection.
package tfevents

import (
	"encoding/binary"
	"hash/crc32"
)

// The TFRecord framing of every record:
//
//	uint64 length          little-endian
//	uint32 masked_crc32c(length bytes)
//	byte   data[length]
//	uint32 masked_crc32c(data)
const (
	headerLen  = 12
	footerLen  = 4
	frameExtra = headerLen + footerLen
	// MaxRecord is the longest record read; a longer length is taken for
	// corruption (event files of scalars hold records of ~100 bytes; an
	// image summary may be a few MiB).
	MaxRecord = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// MaskedCRC is TFRecord's masked CRC32C of b: the CRC rotated right by
// 15 bits plus 0xa282ead8 (so that a CRC of data that holds CRCs is not
// trivially wrong).
func MaskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return ((c >> 15) | (c << 17)) + 0xa282ead8
}

// Frame is one record of a file: its data and where it ends in b.
type Frame struct {
	Data []byte
	End  int // offset just past the record's footer
}

// Corrupt is a stretch of bytes skipped because it is no record: a header
// or data whose CRC does not match.
type Corrupt struct {
	Off, Len int
	Why      string
}

// Frames splits b, which starts at a record boundary, into records. n is
// how many bytes they took, skipped stretches included: b[n:] is a record
// not complete yet (a torn last record: wait for the rest). A record whose
// header is intact but whose data CRC is wrong is skipped as a whole; a
// header whose CRC is wrong makes Frames look for the next offset where a
// header's CRC holds (a false match is a 1 in 2³² chance), and skip the
// bytes in between.
func Frames(b []byte) (frames []Frame, n int, corrupt []Corrupt) {
	off := 0
	for {
		if len(b)-off < headerLen {
			return frames, off, corrupt
		}
		length := binary.LittleEndian.Uint64(b[off:])
		if binary.LittleEndian.Uint32(b[off+8:]) != MaskedCRC(b[off:off+8]) || length > MaxRecord {
			next := resync(b, off+1)
			corrupt = append(corrupt, Corrupt{Off: off, Len: next - off, Why: "bad header CRC"})
			off = next
			continue
		}
		end := off + headerLen + int(length) + footerLen
		if end > len(b) {
			return frames, off, corrupt // torn: the rest is not written yet
		}
		data := b[off+headerLen : end-footerLen]
		if binary.LittleEndian.Uint32(b[end-footerLen:]) != MaskedCRC(data) {
			corrupt = append(corrupt, Corrupt{Off: off, Len: end - off, Why: "bad data CRC"})
		} else {
			frames = append(frames, Frame{Data: data, End: end})
		}
		off = end
	}
}

// resync returns the first offset from off where a record header's CRC
// holds, or where too few bytes are left to tell (the rest may be a
// header being written).
func resync(b []byte, off int) int {
	for ; len(b)-off >= headerLen; off++ {
		if binary.LittleEndian.Uint32(b[off+8:]) == MaskedCRC(b[off:off+8]) && binary.LittleEndian.Uint64(b[off:]) <= MaxRecord {
			return off
		}
	}
	return off
}

// AppendRecord appends data framed as a TFRecord (for tests and tools).
func AppendRecord(dst, data []byte) []byte {
	var h [headerLen]byte
	binary.LittleEndian.PutUint64(h[:], uint64(len(data)))
	binary.LittleEndian.PutUint32(h[8:], MaskedCRC(h[:8]))
	dst = append(dst, h[:]...)
	dst = append(dst, data...)
	return binary.LittleEndian.AppendUint32(dst, MaskedCRC(data))
}
