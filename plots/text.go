package plots

import (
	"image/color"
	"strings"

	"golang.org/x/image/font/sfnt"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// textLine is one line of text drawn in runs: Latin in Liberation Sans,
// Chinese in the CJK font, on one baseline. Titles and legends use it so a
// Chinese job name does not turn the whole title into the CJK font's
// Latin letters.
type textLine struct {
	runs            []textRun
	width           vg.Length
	ascent, descent vg.Length
}

type textRun struct {
	s     string
	style text.Style
	width vg.Length
	asc   vg.Length
}

// line lays out s at size.
func (pt *Painter) line(s string, size vg.Length, bold bool, col color.Color) textLine {
	hdlr := text.Plain{Fonts: pt.fonts.cache}
	var l textLine
	add := func(s string, fnt font.Font) {
		if s == "" {
			return
		}
		sty := text.Style{Color: col, Font: fnt, XAlign: draw.XLeft, YAlign: draw.YBottom, Handler: hdlr}
		ext := hdlr.Extents(fnt)
		r := textRun{s: s, style: sty, width: sty.Width(s), asc: ext.Ascent}
		l.runs = append(l.runs, r)
		l.width += r.width
		l.ascent = max(l.ascent, ext.Ascent)
		l.descent = max(l.descent, ext.Descent)
	}
	if pt.fonts.cjk == nil {
		fnt, out := pt.fonts.text(s, size, bold)
		add(out, fnt)
		return l
	}
	latin, _ := pt.fonts.text("", size, bold)
	cjk := font.Font{Typeface: cjkFace, Size: size}
	var buf sfnt.Buffer
	var cur strings.Builder
	curCJK := false
	for _, r := range s {
		isCJK := !hasGlyph(pt.fonts.latin, &buf, r)
		if isCJK && !hasGlyph(pt.fonts.cjk, &buf, r) {
			r = '?'
			isCJK = false
		}
		if r == ' ' {
			isCJK = curCJK // a space joins the run it is in
		}
		if isCJK != curCJK && cur.Len() > 0 {
			if curCJK {
				add(cur.String(), cjk)
			} else {
				add(cur.String(), latin)
			}
			cur.Reset()
		}
		curCJK = isCJK
		cur.WriteRune(r)
	}
	if curCJK {
		add(cur.String(), cjk)
	} else {
		add(cur.String(), latin)
	}
	return l
}

// height is the line's height from its lowest descent to its highest ascent.
func (l textLine) height() vg.Length { return l.ascent + l.descent }

// draw writes the line with its box aligned at p.
func (l textLine) draw(dc draw.Canvas, p vg.Point, xa draw.XAlignment, ya draw.YAlignment) {
	x := p.X + vg.Length(xa)*l.width
	// ya: 0 bottom, -0.5 centre, -1 top of the box.
	baseline := p.Y + l.descent + vg.Length(ya)*l.height()
	for _, r := range l.runs {
		// text.Plain puts the baseline of a bottom-aligned single line at
		// y - ascent + size.
		y := baseline + r.asc - r.style.Font.Size
		dc.FillText(r.style, vg.Point{X: x, Y: y}, r.s)
		x += r.width
	}
}
