package web

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// This file writes /metrics in Prometheus's text exposition format,
// version 0.0.4 (what client_golang's promhttp writes to a scraper that
// does not ask for protobuf, and what every Prometheus reads): per family,
// sorted by name, "# HELP", "# TYPE" and its samples, sorted by their
// label values; a family without samples is left out. Gauges, counters
// and one summary did not need client_golang's registry, which with
// protobuf was 7 % of a cold build (docs/performance.md).

// contentType is the text format's media type.
const contentType = "text/plain; version=0.0.4; charset=utf-8"

// metricType is a family's # TYPE.
type metricType string

const (
	gaugeType   metricType = "gauge"
	counterType metricType = "counter"
	summaryType metricType = "summary"
)

// desc is a metric family: its name, help, type and label names.
type desc struct {
	name, help string
	typ        metricType
	labels     []string // sorted by name, as they are written
	// order maps the label values as the collector passes them (in the
	// order newDesc was given the names) to labels' order.
	order []int
}

// newDesc describes a family whose samples carry the labels, in this order.
func newDesc(name, help string, typ metricType, labels ...string) *desc {
	order := make([]int, len(labels))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(labels[a], labels[b]) })
	d := &desc{name: name, help: help, typ: typ, order: order}
	for _, i := range order {
		d.labels = append(d.labels, labels[i])
	}
	return d
}

// sample is one series of a family.
type sample struct {
	values []string // label values, in desc.labels' order
	v      float64
	sum    *summaryValue // a summary's quantiles, sum and count instead of v
}

// summaryValue is a summary's sample.
type summaryValue struct {
	quantiles []quantile // ascending
	sum       float64
	count     uint64
}

type quantile struct{ q, v float64 }

// scrape collects the samples of one /metrics. It is not safe for
// concurrent use: a scrape collects in one goroutine.
type scrape struct {
	fams map[*desc][]sample
	// errs are what was left out: a family that could not be read, a
	// series collected twice. The rest is written nonetheless.
	errs []error
}

func newScrape() *scrape { return &scrape{fams: map[*desc][]sample{}} }

// add collects a gauge or counter sample; values are the label values in
// the order the desc was given the names.
func (s *scrape) add(d *desc, v float64, values ...string) {
	s.fams[d] = append(s.fams[d], sample{values: d.arrange(values), v: v})
}

// addSummary collects a summary's sample.
func (s *scrape) addSummary(d *desc, sv summaryValue, values ...string) {
	s.fams[d] = append(s.fams[d], sample{values: d.arrange(values), sum: &sv})
}

// fail records what a scrape left out.
func (s *scrape) fail(err error) { s.errs = append(s.errs, err) }

// arrange puts label values in the written order. A wrong count is a bug
// of the collector's: it panics, as client_golang's MustNewConstMetric
// does. A value that is not UTF-8 (a metric name from a run's output) is
// made valid, since the format is UTF-8; client_golang would panic.
func (d *desc) arrange(values []string) []string {
	if len(values) != len(d.labels) {
		panic(fmt.Sprintf("metrics: %s takes %d label values, got %d", d.name, len(d.labels), len(values)))
	}
	out := make([]string, len(values))
	for i, j := range d.order {
		out[i] = strings.ToValidUTF8(values[j], "\uFFFD")
	}
	return out
}

// appendText appends the scrape in the text format to b. A series
// collected twice (same family, same label values) is written once, the
// first collected, and recorded in s.errs.
func (s *scrape) appendText(b []byte) []byte {
	descs := make([]*desc, 0, len(s.fams))
	for d, samples := range s.fams {
		if len(samples) > 0 {
			descs = append(descs, d)
		}
	}
	slices.SortFunc(descs, func(a, b *desc) int { return strings.Compare(a.name, b.name) })
	for _, d := range descs {
		samples := s.fams[d]
		slices.SortStableFunc(samples, func(a, b sample) int { return slices.Compare(a.values, b.values) })
		b = append(b, "# HELP "...)
		b = append(b, d.name...)
		b = append(b, ' ')
		b = appendHelp(b, d.help)
		b = append(b, "\n# TYPE "...)
		b = append(b, d.name...)
		b = append(b, ' ')
		b = append(b, d.typ...)
		b = append(b, '\n')
		for i, m := range samples {
			if i > 0 && slices.Equal(m.values, samples[i-1].values) {
				s.fail(fmt.Errorf("%s%s collected twice: the first one is served", d.name, appendLabels(nil, d.labels, m.values, "", "")))
				continue
			}
			if m.sum == nil {
				b = appendSample(b, d.name, d.labels, m.values, "", "", m.v)
				continue
			}
			for _, q := range m.sum.quantiles {
				b = appendSample(b, d.name, d.labels, m.values, "quantile", formatFloat(q.q), q.v)
			}
			b = appendSample(b, d.name+"_sum", d.labels, m.values, "", "", m.sum.sum)
			b = appendSample(b, d.name+"_count", d.labels, m.values, "", "", float64(m.sum.count))
		}
	}
	return b
}

// appendSample appends `name{label="value",…} v` and a newline; extra is
// one more label (a summary's quantile) when its name is not "".
func appendSample(b []byte, name string, labels, values []string, extra, extraValue string, v float64) []byte {
	b = append(b, name...)
	b = appendLabels(b, labels, values, extra, extraValue)
	b = append(b, ' ')
	b = append(b, formatFloat(v)...)
	return append(b, '\n')
}

func appendLabels(b []byte, labels, values []string, extra, extraValue string) []byte {
	if len(labels) == 0 && extra == "" {
		return b
	}
	b = append(b, '{')
	for i, l := range labels {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendLabel(b, l, values[i])
	}
	if extra != "" {
		if len(labels) > 0 {
			b = append(b, ',')
		}
		b = appendLabel(b, extra, extraValue)
	}
	return append(b, '}')
}

func appendLabel(b []byte, name, value string) []byte {
	b = append(b, name...)
	b = append(b, `="`...)
	b = appendEscaped(b, value, true)
	return append(b, '"')
}

// appendHelp escapes a HELP text: backslash and newline.
func appendHelp(b []byte, help string) []byte {
	return appendEscaped(b, strings.ToValidUTF8(help, "\uFFFD"), false)
}

// appendEscaped escapes backslash and newline, and the double quote too
// in a label value.
func appendEscaped(b []byte, s string, quote bool) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quote:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// formatFloat writes a value as client_golang does: the shortest 'g'
// form, and +Inf, -Inf, NaN spelled so; -0 is 0.
func formatFloat(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, +1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
