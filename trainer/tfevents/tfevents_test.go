package tfevents

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

const t0 = 1764547200.0 // the fixtures' start (tbwriter.py's T0)

// readDir reads every record of a directory's event files.
func readDir(t *testing.T, dir string) ([]DirRecord, *Dir) {
	t.Helper()
	d := NewDir(dir, nil, nil)
	var out []DirRecord
	for i := 0; i < 100; i++ {
		if d.Poll(1<<20, func(r DirRecord) { out = append(out, r) }) == 0 {
			break
		}
	}
	return out, d
}

// series collects the scalars of one metric name.
func series(recs []DirRecord, name string) []Scalar {
	var out []Scalar
	for _, r := range recs {
		for _, s := range r.Scalars {
			if MetricName(r.File.Sub(), s.Tag) == name {
				out = append(out, s)
			}
		}
	}
	return out
}

func TestMaskedCRC(t *testing.T) {
	// CRC32C's check value (RFC 3720 B.4), then TFRecord's masking.
	if c := crc32.Checksum([]byte("123456789"), castagnoli); c != 0xE3069283 {
		t.Fatalf("crc32c = %#x, want 0xe3069283", c)
	}
	if got, want := MaskedCRC([]byte("123456789")), uint32(((0xE3069283>>15)|(0xE3069283<<17))&0xffffffff)+0xa282ead8; got != want {
		t.Errorf("masked = %#x, want %#x", got, want)
	}
}

func TestPyTorchFixture(t *testing.T) {
	recs, d := readDir(t, "testdata/pytorch")
	loss := series(recs, "loss/train")
	if len(loss) != 20 {
		t.Fatalf("loss/train: %d points, want 20", len(loss))
	}
	for i, s := range loss {
		want := float64(float32(1.0 / float64(i+1))) // simple_value is a float
		if s.Step != int64(i) || s.Value != want || s.WallTime != t0+1+float64(i)*0.5 || s.Tag != "Loss/train" {
			t.Errorf("point %d = %+v, want step %d value %g wall %g", i, s, i, want, t0+1+float64(i)*0.5)
		}
	}
	if acc := series(recs, "accuracy/val"); len(acc) != 4 || acc[0].Step != 4 || acc[3].Step != 19 {
		t.Errorf("accuracy/val = %+v, want steps 4, 9, 14, 19", acc)
	}
	lr := series(recs, "lr") // new_style: a tensor with float_val
	if len(lr) != 20 || lr[19].Value != float64(float32(0.1*math.Pow(0.9, 19))) {
		t.Errorf("lr (new_style tensors) = %d points, last %+v", len(lr), lr[len(lr)-1])
	}
	f := d.Files["events.out.tfevents.1764547200.fixture.4242.0"]
	if fi, _ := os.Stat(f.Path); f.Off != fi.Size() || f.Torn != 0 || f.Corrupt != 0 {
		t.Errorf("offset %d of %d, torn %d, corrupt %d", f.Off, fi.Size(), f.Torn, f.Corrupt)
	}
}

func TestTF2Fixture(t *testing.T) {
	recs, _ := readDir(t, "testdata/tf2")
	for _, c := range []struct {
		name string
		want []float64
	}{
		{"epoch_loss", []float64{1, float64(float32(0.5)), float64(float32(1.0 / 3))}}, // tensor_content float32
		{"epoch_learning_rate", []float64{1e-3, 1e-3 / 2, 1e-3 / 3}},                   // double
		{"images_seen", []float64{128, 256, 384}},                                      // int64
		{"loss_fp16", []float64{0.25}},                                                 // half_val
		{"notes", nil},                                                                 // a text summary
	} {
		var got []float64
		for i, s := range series(recs, c.name) {
			got = append(got, s.Value)
			if s.Step != int64(i+1) && c.name != "loss_fp16" {
				t.Errorf("%s point %d at step %d", c.name, i, s.Step)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestSeveralFilesAndNewOnes: a directory's files, its subdirectory's,
// and a file that appears later.
func TestSeveralFilesAndNewOnes(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/multi")); err != nil {
		t.Fatal(err)
	}
	d := NewDir(dir, nil, nil)
	var recs []DirRecord
	d.Poll(1<<20, func(r DirRecord) { recs = append(recs, r) })
	loss := series(recs, "loss")
	var steps []int64
	for _, s := range loss {
		steps = append(steps, s.Step)
	}
	// The first file has 0..11, the second (restarted at 10) 10..14.
	if want := []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 10, 11, 12, 13, 14}; !slices.Equal(steps, want) {
		t.Errorf("loss steps %v, want %v", steps, want)
	}
	if val := series(recs, "loss_val/loss"); len(val) != 2 || val[1].Step != 10 {
		t.Errorf("loss_val/loss = %+v, want steps 5 and 10", val)
	}
	// A new file appears.
	var buf []byte
	buf = AppendRecord(buf, testEvent(t0+999, 20, simpleValue("loss", 0.5)))
	if err := os.WriteFile(filepath.Join(dir, "events.out.tfevents.1764548000.host.9.0"), buf, 0o644); err != nil {
		t.Fatal(err)
	}
	recs = nil
	d.Poll(1<<20, func(r DirRecord) { recs = append(recs, r) })
	if loss := series(recs, "loss"); len(loss) != 1 || loss[0].Step != 20 || loss[0].Value != 0.5 {
		t.Errorf("after a new file: %+v, want its one point", loss)
	}
}

// TestDamagedFile: a corrupt record is skipped with one warning, the torn
// last record is waited for and read once complete.
func TestDamagedFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/damaged")); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	d := NewDir(dir, nil, slogTo(&log))
	var recs []DirRecord
	d.Poll(1<<20, func(r DirRecord) { recs = append(recs, r) })
	d.Poll(1<<20, func(r DirRecord) { recs = append(recs, r) })
	var steps []int64
	for _, s := range series(recs, "loss") {
		steps = append(steps, s.Step)
	}
	if want := []int64{1, 3, 4, 5}; !slices.Equal(steps, want) {
		t.Errorf("steps %v, want %v (2 corrupt, 6 torn)", steps, want)
	}
	if n := strings.Count(log.String(), "corrupt record"); n != 1 || !strings.Contains(log.String(), "bad data CRC") {
		t.Errorf("want one warning naming the bad CRC:\n%s", log.String())
	}
	torn := d.TornAtEnd()
	if len(torn) != 1 || torn[0].Torn == 0 {
		t.Fatalf("torn files %v", torn)
	}
	// The writer finishes the record.
	full := AppendRecord(nil, testEvent(t0+406, 6, simpleValue("loss", 0.6)))
	f := torn[0]
	fh, err := os.OpenFile(f.Path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.Write(full[len(full)-7:]); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	recs = nil
	d.Poll(1<<20, func(r DirRecord) { recs = append(recs, r) })
	if s := series(recs, "loss"); len(s) != 1 || s[0].Step != 6 || s[0].Value != float64(float32(0.6)) {
		t.Errorf("after the rest of the torn record: %+v", s)
	}
	if len(d.TornAtEnd()) != 0 || strings.Count(log.String(), "corrupt record") != 1 {
		t.Errorf("torn %v; log:\n%s", d.TornAtEnd(), log.String())
	}
}

// TestBadHeaderResyncs: a header whose CRC is wrong is skipped up to the
// next header whose CRC holds.
func TestBadHeaderResyncs(t *testing.T) {
	var b []byte
	for step := int64(1); step <= 3; step++ {
		b = AppendRecord(b, testEvent(t0, step, simpleValue("loss", float32(step))))
	}
	first := len(AppendRecord(nil, testEvent(t0, 1, simpleValue("loss", 1))))
	b[first+2] ^= 0xff // the length of step 2's record
	frames, n, corrupt := Frames(b)
	if n != len(b) || len(frames) != 2 || len(corrupt) != 1 || corrupt[0].Why != "bad header CRC" || corrupt[0].Off != first {
		t.Fatalf("frames %d, n %d of %d, corrupt %+v", len(frames), n, len(b), corrupt)
	}
	s, err := DecodeEvent(frames[1].Data, Plugins{})
	if err != nil || len(s) != 1 || s[0].Step != 3 {
		t.Errorf("after the resync: %+v %v", s, err)
	}
}

// TestReplayAndOffsets: records before the stored offsets are marked as
// replayed, later ones are not.
func TestReplayAndOffsets(t *testing.T) {
	recs, _ := readDir(t, "testdata/pytorch")
	rel := "events.out.tfevents.1764547200.fixture.4242.0"
	mid := recs[len(recs)/2].End
	d2 := NewDir("testdata/pytorch", map[string]int64{rel: mid}, nil)
	var replayed, fresh int
	d2.Poll(1<<20, func(r DirRecord) {
		if r.Replay {
			replayed++
		} else {
			fresh++
		}
	})
	if replayed+fresh != len(recs) || replayed != len(recs)/2+1 {
		t.Errorf("replayed %d, fresh %d of %d records, stored offset %d", replayed, fresh, len(recs), mid)
	}
}

// testEvent encodes an Event with protowire (independently of tbwriter.py).
func testEvent(wall float64, step int64, values ...[]byte) []byte {
	var b []byte
	b = protowire.AppendTag(b, eventWallTime, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, math.Float64bits(wall))
	if step != 0 {
		b = protowire.AppendTag(b, eventStep, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(step))
	}
	if len(values) > 0 {
		var s []byte
		for _, v := range values {
			s = protowire.AppendTag(s, summaryValue, protowire.BytesType)
			s = protowire.AppendBytes(s, v)
		}
		b = protowire.AppendTag(b, eventSummary, protowire.BytesType)
		b = protowire.AppendBytes(b, s)
	}
	return b
}

func simpleValue(tag string, v float32) []byte {
	var b []byte
	b = protowire.AppendTag(b, valueTag, protowire.BytesType)
	b = protowire.AppendString(b, tag)
	b = protowire.AppendTag(b, valueSimple, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, math.Float32bits(v))
}

// newStyleValue is PyTorch's new_style scalar: a float tensor with an
// empty shape and the scalars plugin.
func newStyleValue(tag string, v float32) []byte {
	tensor := protowire.AppendVarint(protowire.AppendTag(nil, tensorDtype, protowire.VarintType), dtFloat)
	tensor = bytesField(tensor, tensorShape, nil)
	tensor = bytesField(tensor, tensorFloat, protowire.AppendFixed32(nil, math.Float32bits(v)))
	meta := bytesField(nil, metadataPluginData, bytesField(nil, pluginName, []byte(ScalarsPlugin)))
	b := bytesField(nil, valueTag, []byte(tag))
	b = bytesField(b, valueTensor, tensor)
	return bytesField(b, valueMetadata, meta)
}

// bytesField appends a length-delimited field.
func bytesField(b []byte, num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
}

// TestWriterScriptFollowsTheSpec checks tbwriter.py, the writer side of
// the tests, against the format: each record's framing is read here with
// hash/crc32 directly (length, masked CRC32C of the length, data, masked
// CRC32C of the data), and its data is byte for byte the Event that
// protowire encodes here. It also checks that the committed fixtures are
// what the script writes.
func TestWriterScriptFollowsTheSpec(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3: tbwriter.py is not checked")
	}
	dir := t.TempDir()
	script := `import sys; sys.path.insert(0, "testdata"); import tbwriter
w = tbwriter.EventWriter(sys.argv[1], start=1764547200.0, host="h", pid=1)
w.add_scalar("loss", 0.5, 7, walltime=1764547201.25)
w.add_scalar("lr", 0.001, 8, walltime=1764547202.5, new_style=True)
w.add_scalar("neg", -3.0, -2, walltime=1764547203.0)
w.close()
`
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, py, "-c", script, dir).CombinedOutput(); err != nil {
		t.Fatalf("tbwriter.py: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "events.out.tfevents.1764547200.h.1.0"))
	if err != nil {
		t.Fatal(err)
	}
	fileVersion := protowire.AppendTag(protowire.AppendFixed64(protowire.AppendTag(nil, eventWallTime, protowire.Fixed64Type),
		math.Float64bits(1764547200.0)), 3, protowire.BytesType)
	fileVersion = protowire.AppendString(fileVersion, "brain.Event:2")
	want := [][]byte{
		fileVersion,
		testEvent(1764547201.25, 7, simpleValue("loss", 0.5)),
		testEvent(1764547202.5, 8, newStyleValue("lr", 0.001)),
		testEvent(1764547203.0, -2, simpleValue("neg", -3)),
	}
	castagnoliTable := crc32.MakeTable(crc32.Castagnoli)
	mask := func(p []byte) uint32 {
		c := crc32.Checksum(p, castagnoliTable)
		return ((c >> 15) | (c << 17)) + 0xa282ead8
	}
	off := 0
	for i, w := range want {
		if len(b)-off < 12 {
			t.Fatalf("record %d: the file ends at %d", i, off)
		}
		n := binary.LittleEndian.Uint64(b[off:])
		if got := binary.LittleEndian.Uint32(b[off+8:]); got != mask(b[off:off+8]) {
			t.Errorf("record %d: length CRC %#x, want %#x", i, got, mask(b[off:off+8]))
		}
		data := b[off+12 : off+12+int(n)]
		if got := binary.LittleEndian.Uint32(b[off+12+int(n):]); got != mask(data) {
			t.Errorf("record %d: data CRC %#x, want %#x", i, got, mask(data))
		}
		if !bytes.Equal(data, w) {
			t.Errorf("record %d:\n got %x\nwant %x", i, data, w)
		}
		off += 12 + int(n) + 4
	}
	if off != len(b) {
		t.Errorf("%d bytes after the records", len(b)-off)
	}

	// The fixtures are the script's.
	fx := t.TempDir()
	if out, err := exec.CommandContext(ctx, py, "testdata/tbwriter.py", "fixtures", fx).CombinedOutput(); err != nil {
		t.Fatalf("tbwriter.py fixtures: %v\n%s", err, out)
	}
	err = filepath.WalkDir(fx, func(path string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(fx, path)
		got, _ := os.ReadFile(path)
		committed, err := os.ReadFile(filepath.Join("testdata", rel))
		if err != nil || !bytes.Equal(got, committed) {
			t.Errorf("testdata/%s differs from what tbwriter.py writes (%v): run python3 testdata/tbwriter.py fixtures testdata", rel, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func FuzzFrames(f *testing.F) {
	for _, p := range []string{"testdata/pytorch/events.out.tfevents.1764547200.fixture.4242.0", "testdata/tf2/events.out.tfevents.1764547300.fixture.7.1"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		frames, n, corrupt := Frames(b)
		if n < 0 || n > len(b) {
			t.Fatalf("n = %d of %d", n, len(b))
		}
		covered := 0
		for _, c := range corrupt {
			covered += c.Len
		}
		for _, fr := range frames {
			covered += len(fr.Data) + frameExtra
			DecodeEvent(fr.Data, Plugins{}) // must not panic
		}
		if covered != n {
			t.Fatalf("frames and corrupt stretches cover %d bytes, n = %d", covered, n)
		}
		DecodeEvent(b, Plugins{})
	})
}

func slogTo(w *bytes.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }
