package plots

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"unicode"

	xfont "golang.org/x/image/font"
	"golang.org/x/image/font/sfnt"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/font/liberation"
)

// FontNone as Options.Font draws without a CJK font even when one is
// installed: Chinese labels are replaced by English ones.
const FontNone = "none"

// CJKFontPaths are the files looked at, in order, when no font is
// configured: Debian's fonts-noto-cjk, fonts-wqy-microhei, fonts-wqy-zenhei
// and fonts-arphic-*.
var CJKFontPaths = []string{
	"/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
	"/usr/share/fonts/opentype/noto/NotoSansCJKsc-Regular.otf",
	"/usr/share/fonts/truetype/noto/NotoSansCJK-Regular.ttc",
	"/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
	"/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc",
	"/usr/share/fonts/truetype/arphic/uming.ttc",
	"/usr/share/fonts/truetype/arphic/ukai.ttc",
}

// Typefaces in a Painter's font cache.
const (
	latinFace = "Liberation"
	cjkFace   = "CJK"
)

// fonts is what a Painter draws text with: the embedded Liberation Sans
// and, when found, one CJK font.
type fonts struct {
	cache    *font.Cache
	latin    *sfnt.Font // Liberation Sans Regular, to test glyph coverage
	cjk      *sfnt.Font // nil without a CJK font
	cjkPath  string
	cjkName  string
	fallback bool // Chinese is replaced by English (no CJK font)
}

// probe is a few common characters a CJK font must have to be used.
const probe = "损失显存训练"

func loadFonts(path string) (*fonts, error) {
	coll := liberation.Collection()
	f := &fonts{cache: font.NewCache(nil)}
	for _, face := range coll {
		if face.Font.Variant != "Sans" {
			continue
		}
		fnt := face.Font
		fnt.Typeface = latinFace
		fnt.Variant = ""
		f.cache.Add(font.Collection{{Font: fnt, Face: face.Face}})
		if fnt.Weight == xfont.WeightNormal && fnt.Style == xfont.StyleNormal {
			f.latin = face.Face
		}
	}
	if f.latin == nil {
		return nil, errors.New("fonts: Liberation Sans is missing from gonum's collection")
	}
	switch strings.TrimSpace(path) {
	case FontNone:
	case "":
		for _, p := range CJKFontPaths {
			if face, name, err := openCJK(p); err == nil {
				f.cjk, f.cjkPath, f.cjkName = face, p, name
				break
			}
		}
	default:
		face, name, err := openCJK(path)
		if err != nil {
			return nil, err
		}
		f.cjk, f.cjkPath, f.cjkName = face, path, name
	}
	if f.cjk != nil {
		f.cache.Add(font.Collection{{Font: font.Font{Typeface: cjkFace}, Face: f.cjk}})
	}
	f.fallback = f.cjk == nil
	return f, nil
}

// openCJK opens a TTF, OTF, TTC or OTC file and returns the face that
// draws Chinese, preferring the Simplified Chinese one of a Noto CJK
// collection. The file is mapped, not read (mapFile): a CJK font is 17 to
// 20 MB, and reading it was 40% of `trainbot plot`'s time and as much of
// serve's memory, where a chart touches only the few pages of its glyphs.
// The mapping is released once the face returned is unreachable.
func openCJK(path string) (*sfnt.Font, string, error) {
	data, unmap, err := mapFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("font %s: %w", path, err)
	}
	face, name, err := chineseFace(data)
	if err != nil {
		unmap()
		return nil, "", fmt.Errorf("font %s: %w", path, err)
	}
	if name == "" {
		name = filepath.Base(path)
	}
	// The face reads the mapping until it is unreachable.
	runtime.AddCleanup(face, func(unmap func()) { unmap() }, unmap)
	return face, name, nil
}

// chineseFace returns the face of a font file's data that draws Chinese, and
// its full name.
func chineseFace(data []byte) (*sfnt.Font, string, error) {
	coll, err := sfnt.ParseCollection(data)
	if err != nil {
		return nil, "", err
	}
	var best *sfnt.Font
	bestName := ""
	var buf sfnt.Buffer
	var firstErr error
	for i := 0; i < coll.NumFonts(); i++ {
		face, err := coll.Font(i)
		if err != nil {
			// Some fonts (wqy-zenhei) have tables that do not start on a
			// four-byte boundary, which x/image/font/sfnt refuses: read
			// the face through a view that puts its tables on aligned
			// offsets, without copying them.
			var view *alignedView
			if view, err = alignedFace(data, i); err == nil {
				face, err = sfnt.ParseReaderAt(view)
			}
		}
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if !covers(face, &buf, probe) {
			continue
		}
		name, _ := face.Name(&buf, sfnt.NameIDFull)
		if best == nil {
			best, bestName = face, name
		}
		// Noto Sans CJK collections start with the Japanese face.
		if !strings.Contains(name, "CJK") || strings.Contains(name, " SC") {
			best, bestName = face, name
			break
		}
	}
	if best == nil {
		if firstErr != nil {
			return nil, "", firstErr
		}
		return nil, "", fmt.Errorf("no face in it draws Chinese (%s)", probe)
	}
	return best, bestName, nil
}

// alignedView is a font file of one face of a TTF/OTF/TTC/OTC file whose
// tables start on four-byte boundaries, read from the original data: its
// own header, then each table of the original (zero-padded to four
// bytes), in the order of the table records.
type alignedView struct {
	head []byte // the offset table and the table records, rewritten
	segs []segment
	size int64
}

// segment is a table of the view: at off in the view, the bytes data.
type segment struct {
	off  int64
	data []byte
}

// ReadAt reads the view (io.ReaderAt); padding reads as zeros.
func (v *alignedView) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("alignedView: negative offset")
	}
	n := 0
	for n < len(p) {
		at := off + int64(n)
		if at >= v.size {
			return n, io.EOF
		}
		if at < int64(len(v.head)) {
			n += copy(p[n:], v.head[at:])
			continue
		}
		// The last segment starting at or before at.
		i := sort.Search(len(v.segs), func(i int) bool { return v.segs[i].off > at }) - 1
		if i < 0 { // between the header and the first table: padding
			next := v.size
			if len(v.segs) > 0 {
				next = v.segs[0].off
			}
			n += zero(p[n:min(len(p), n+int(next-at))])
			continue
		}
		s := v.segs[i]
		if rel := at - s.off; rel < int64(len(s.data)) {
			n += copy(p[n:], s.data[rel:])
			continue
		}
		next := v.size
		if i+1 < len(v.segs) {
			next = v.segs[i+1].off
		}
		n += zero(p[n:min(len(p), n+int(next-at))])
	}
	return n, nil
}

// zero clears b and returns its length.
func zero(b []byte) int {
	clear(b)
	return len(b)
}

// alignedFace returns face index of a TTF/OTF/TTC/OTC file as a view of a
// font file of its own whose tables start on four-byte boundaries.
func alignedFace(data []byte, index int) (*alignedView, error) {
	be16 := func(b []byte) int { return int(binary.BigEndian.Uint16(b)) }
	be32 := func(b []byte) int { return int(binary.BigEndian.Uint32(b)) }
	bad := errors.New("malformed font file")
	off := 0
	if len(data) >= 12 && string(data[:4]) == "ttcf" {
		if index >= be32(data[8:]) || len(data) < 16+4*index {
			return nil, bad
		}
		off = be32(data[12+4*index:])
	}
	if off < 0 || len(data) < off+12 {
		return nil, bad
	}
	n := be16(data[off+4:])
	headLen := 12 + 16*n
	if len(data) < off+headLen {
		return nil, bad
	}
	v := &alignedView{head: append([]byte(nil), data[off:off+headLen]...)}
	size := int64(headLen+3) &^ 3
	for i := range n {
		rec := v.head[12+16*i : 12+16*i+16]
		o, l := be32(rec[8:]), be32(rec[12:])
		if o < 0 || l < 0 || o+l > len(data) {
			return nil, bad
		}
		binary.BigEndian.PutUint32(rec[8:], uint32(size))
		v.segs = append(v.segs, segment{off: size, data: data[o : o+l]})
		size += int64(l+3) &^ 3
	}
	v.size = size
	return v, nil
}

// covers reports whether face has a glyph for every rune of s.
func covers(face *sfnt.Font, buf *sfnt.Buffer, s string) bool {
	for _, r := range s {
		if !hasGlyph(face, buf, r) {
			return false
		}
	}
	return true
}

func hasGlyph(face *sfnt.Font, buf *sfnt.Buffer, r rune) bool {
	if r == '\n' || r == ' ' {
		return true
	}
	idx, err := face.GlyphIndex(buf, r)
	return err == nil && idx != 0
}

// english replaces Chinese words a chart may carry when no font can draw
// them: metric names, job names and parameter values typed in Chinese.
// Longer words come first so that 验证损失 becomes "val loss", not
// "val" + "loss" glued.
var english = []struct{ zh, en string }{
	{"验证损失", "val loss"}, {"训练损失", "train loss"}, {"测试损失", "test loss"},
	{"学习率", "lr"}, {"准确率", "accuracy"}, {"正确率", "accuracy"}, {"批大小", "batch size"},
	{"损失曲线", "loss"}, {"损失", "loss"}, {"验证", "val"}, {"训练", "train"}, {"测试", "test"},
	{"精度", "precision"}, {"显存", "GPU memory"}, {"内存", "memory"}, {"利用率", "utilisation"},
	{"温度", "temperature"}, {"步数", "step"}, {"时间", "time"}, {"对比", "comparison"},
	{"平滑", "smoothed"}, {"峰值", "peak"}, {"模型", "model"}, {"任务", "job"}, {"运行", "run"},
	{"轮", "epoch"}, {"步", "step"}, {"梯度", "gradient"}, {"检查点", "checkpoint"},
}

// text returns the font to draw s with and the string to draw: s itself
// when Liberation Sans or the CJK font has every glyph; otherwise Chinese
// words become English ones and what is left that no font can draw
// becomes "?", so that no label is drawn as empty boxes.
func (f *fonts) text(s string, size font.Length, bold bool) (font.Font, string) {
	latin := font.Font{Typeface: latinFace, Size: size}
	if bold {
		latin.Weight = xfont.WeightBold
	}
	var buf sfnt.Buffer
	if covers(f.latin, &buf, s) {
		return latin, s
	}
	if f.cjk != nil {
		return font.Font{Typeface: cjkFace, Size: size}, replaceMissing(f.cjk, &buf, s)
	}
	for _, w := range english {
		if strings.Contains(s, w.zh) {
			s = strings.ReplaceAll(s, w.zh, " "+w.en+" ")
		}
	}
	s = replaceMissing(f.latin, &buf, s)
	return latin, tidySpaces(s)
}

// replaceMissing replaces each run of runes face cannot draw with one "?".
func replaceMissing(face *sfnt.Font, buf *sfnt.Buffer, s string) string {
	var b strings.Builder
	missing := false
	for _, r := range s {
		if hasGlyph(face, buf, r) {
			b.WriteRune(r)
			missing = false
			continue
		}
		if !missing {
			b.WriteByte('?')
		}
		missing = true
	}
	return b.String()
}

// tidySpaces removes the doubled spaces and the spaces before closing
// punctuation that word replacement leaves.
func tidySpaces(s string) string {
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == ' ' }), " ")
	for _, p := range []string{")", ",", ":", "]", "="} {
		s = strings.ReplaceAll(s, " "+p, p)
	}
	for _, p := range []string{"(", "[", "="} {
		s = strings.ReplaceAll(s, p+" ", p)
	}
	return strings.TrimFunc(s, unicode.IsSpace)
}
