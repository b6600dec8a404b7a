// Package render says things about runs for people: the texts of status,
// progress, history, jobs and end reports, what to try after running out
// of memory, the charts (through plots), and the one set of Format* helpers
// that texts and charts share. It decides nothing about who gets what or
// when (bot/notify and bot/deliver do); it only draws and words.
package render

import (
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/internal/units"
)

// The Format* helpers are internal/units, the one implementation shared by
// texts, chart labels (plots) and the supervisor's own detail strings
// (trainer): "1.50 GiB", "3m05s", "0.0686".

// FormatBytes prints a byte count in binary units: "1.50 GiB".
func FormatBytes(n int64) string { return units.Bytes(n) }

// FormatDuration prints a duration compactly: "45s", "3m05s", "2h".
func FormatDuration(d time.Duration) string { return units.Duration(d) }

// FormatValue prints a metric value: "0.0686", "3.000e-05".
func FormatValue(v float64) string { return units.Value(v) }

// FormatMetric prints the value of metric name: a byte count in binary
// units ("240.04 MiB"), anything else as FormatValue.
func FormatMetric(name string, v float64) string { return units.Metric(name, v) }

// FormatSI prints a number with an SI suffix: "12k", "1.5M".
func FormatSI(v float64) string { return units.SI(v) }

// ParamsText prints parameters sorted by name: "batch_size=32 lr=0.001".
func ParamsText(p map[string]string) string {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + p[k]
	}
	return strings.Join(parts, " ")
}

// PageLabel is the label of the button that opens a run's web page, in
// zh+en.
var PageLabel = i18n.ZhEn.Button(i18n.BtnOpen)

// PageButtons is the row with the [网页 Open] button to a run's web page,
// nil when pageURL is nil or gives no address (no [http] public_url).
func PageButtons(l i18n.Lang, pageURL func(runID int64) string, runID int64) [][]chat.Button {
	if pageURL == nil {
		return nil
	}
	u := pageURL(runID)
	if u == "" {
		return nil
	}
	return [][]chat.Button{{{Label: l.Button(i18n.BtnOpen), URL: u}}}
}

// StartButtons are shown under a started run and its progress: labelled
// in l ([停止 Stop] in zh+en), sending the same command words in every
// language.
func StartButtons(l i18n.Lang) [][]chat.Button {
	return [][]chat.Button{{{Label: l.Button(i18n.BtnStop), Data: "停止"}, {Label: l.Button(i18n.BtnStatus), Data: "状态"}, {Label: l.Button(i18n.BtnPlot), Data: "画图"}}}
}

// Clip shortens s to n characters, ending in "…" when it was longer.
func Clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}
