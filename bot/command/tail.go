package command

import (
	"bytes"
	"io"
	"os"
	"strings"
	"unicode/utf8"
)

// TailFile returns the last n lines of a file, reading at most its last 1 MiB.
func TailFile(path string, n int) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	const maxRead = 1 << 20
	off := max(fi.Size()-maxRead, 0)
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxRead))
	if err != nil {
		return nil, err
	}
	if off > 0 {
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	b = bytes.TrimRight(b, "\n")
	if len(b) == 0 {
		return nil, nil
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		if j := strings.LastIndexByte(l, '\r'); j >= 0 && j < len(l)-1 {
			l = l[j+1:]
		}
		if len(l) > 2048 {
			l = l[:2048] + "…"
		}
		if !utf8.ValidString(l) {
			l = strings.ToValidUTF8(l, "\uFFFD")
		}
		lines[i] = l
	}
	return lines, nil
}
