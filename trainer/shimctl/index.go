package shimctl

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"time"
)

// IndexEntry is one output.idx record: the log had been read up to Offset
// at Time.
type IndexEntry struct {
	Offset int64
	Time   time.Time
}

// ReadIndex reads the records of an output.idx from record number
// fromRecord on (0 is the first). A trailing partial record (one being
// written) is ignored; the next call from len(entries)+fromRecord reads it
// once it is whole.
func ReadIndex(path string, fromRecord int64) ([]IndexEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadIndexFile(f, fromRecord)
}

// ReadIndexFile is ReadIndex of an output.idx open in f: a reader that
// follows a live run's index keeps it open (the shim only appends to it)
// instead of opening it for every read of the log.
func ReadIndexFile(f *os.File, fromRecord int64) ([]IndexEntry, error) {
	if fromRecord < 0 {
		fromRecord = 0
	}
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	n := st.Size()/IndexRecordSize - fromRecord
	if n <= 0 {
		return nil, nil
	}
	b := make([]byte, n*IndexRecordSize)
	got, err := f.ReadAt(b, fromRecord*IndexRecordSize)
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	out := make([]IndexEntry, 0, got/IndexRecordSize)
	for i := 0; i+IndexRecordSize <= got; i += IndexRecordSize {
		out = append(out, IndexEntry{
			Offset: int64(binary.LittleEndian.Uint64(b[i:])),
			Time:   time.Unix(0, int64(binary.LittleEndian.Uint64(b[i+8:]))),
		})
	}
	return out, nil
}
