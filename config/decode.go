package config

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	toml "github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// FieldError is one problem with one key of the config.
type FieldError struct {
	File string // "" when the problem is not from a file (environment, flags)
	Line int    // 0 when unknown
	Key  string // dotted path: "jobs[0].params.batch_size.max"
	Msg  string
	// meant is the key an unknown key was most likely a typo of
	// ("jobs[0].command" for "jobs[0].comand"): what validation would say
	// of that key's missing value is the same mistake, not another.
	meant string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			b.WriteString(":" + strconv.Itoa(e.Line))
		}
		b.WriteString(": ")
	} else if e.Line > 0 {
		b.WriteString("line " + strconv.Itoa(e.Line) + ": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// Errors is every problem found, in file order.
type Errors []*FieldError

func (es Errors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}

// Sorted returns the errors in line order, without duplicates.
func (es Errors) Sorted() Errors {
	out := make(Errors, 0, len(es))
	seen := map[string]bool{}
	for _, e := range es {
		if k := e.Error(); !seen[k] {
			seen[k] = true
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Line < out[j].Line })
	return out
}

// Unwrap returns the individual errors.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// ErrInvalid is wrapped by every config error.
var ErrInvalid = errors.New("invalid config")

// decoder maps a parsed TOML document onto Go structs: wrong types are
// errors that name the key and its line, and every error is collected
// rather than the first returned. Unknown keys are go-toml's to find
// (unknownKeys); the decoder leaves them out.
type decoder struct {
	file  string
	lines map[string]int
	errs  Errors
}

func (d *decoder) errorf(key, format string, args ...any) {
	d.errs = append(d.errs, &FieldError{File: d.file, Line: d.line(key), Key: key, Msg: fmt.Sprintf(format, args...)})
}

// line finds the line of a key, or of its nearest enclosing table.
func (d *decoder) line(key string) int {
	for k := key; k != ""; {
		if l, ok := d.lines[k]; ok {
			return l
		}
		i := strings.LastIndexAny(k, ".[")
		if i < 0 {
			break
		}
		k = k[:i]
	}
	return 0
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Duration is a time.Duration written as a string: "30s", "1h30m", "2d".
type Duration time.Duration

// ParseDuration accepts Go durations plus a "d" (24 h) unit.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if v, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(v, 64)
		if err == nil && n >= 0 {
			return time.Duration(n * float64(24*time.Hour)), nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("want a duration like \"30s\", \"10m\" or \"2h\", got %q", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("a duration cannot be negative: %q", s)
	}
	return d, nil
}

// ByteSize is a size written as an integer of bytes or a string: "1GiB", "500MB".
type ByteSize int64

// ParseByteSize reads "1GiB", "500 MB", "4096".
func ParseByteSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	num := strings.TrimRightFunc(s, func(r rune) bool { return (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || r == ' ' })
	unit := strings.TrimSpace(s[len(num):])
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("want a size like \"512MiB\" or \"2GB\", got %q", s)
	}
	mult := map[string]float64{"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
		"KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
	m, ok := mult[strings.ToUpper(unit)]
	if !ok {
		return 0, fmt.Errorf("unknown size unit %q in %q (use B, KiB, MiB, GiB, KB, MB, GB)", unit, s)
	}
	return int64(v * m), nil
}

var (
	durationType = reflect.TypeOf(Duration(0))
	byteSizeType = reflect.TypeOf(ByteSize(0))
)

// valueDecoder is a type that reads its TOML value itself (GPUs: a
// number or an array): an error is reported at its key.
type valueDecoder interface {
	decodeTOML(v any) error
}

var valueDecoderType = reflect.TypeOf((*valueDecoder)(nil)).Elem()

// decodeValue stores v (from go-toml: string, int64, float64, bool,
// []any, map[string]any, local dates) into dst.
func (d *decoder) decodeValue(path string, v any, dst reflect.Value) {
	if dst.CanAddr() && dst.Addr().Type().Implements(valueDecoderType) {
		if err := dst.Addr().Interface().(valueDecoder).decodeTOML(v); err != nil {
			d.errorf(path, "%v", err)
		}
		return
	}
	switch dst.Type() {
	case durationType:
		s, ok := v.(string)
		if !ok {
			d.errorf(path, "want a duration string like \"30s\", got %s", describe(v))
			return
		}
		dur, err := ParseDuration(s)
		if err != nil {
			d.errorf(path, "%v", err)
			return
		}
		dst.SetInt(int64(dur))
		return
	case byteSizeType:
		switch x := v.(type) {
		case int64:
			if x < 0 {
				d.errorf(path, "a size cannot be negative")
				return
			}
			dst.SetInt(x)
		case string:
			n, err := ParseByteSize(x)
			if err != nil {
				d.errorf(path, "%v", err)
				return
			}
			dst.SetInt(n)
		default:
			d.errorf(path, "want a size like \"1GiB\" or a number of bytes, got %s", describe(v))
		}
		return
	}
	switch dst.Kind() {
	case reflect.Pointer:
		nv := reflect.New(dst.Type().Elem())
		before := len(d.errs)
		d.decodeValue(path, v, nv.Elem())
		if len(d.errs) == before {
			dst.Set(nv)
		}
	case reflect.String:
		s, ok := v.(string)
		if !ok {
			d.errorf(path, "want a string, got %s", describe(v))
			return
		}
		dst.SetString(s)
	case reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			d.errorf(path, "want true or false, got %s", describe(v))
			return
		}
		dst.SetBool(b)
	case reflect.Int, reflect.Int64, reflect.Int32:
		n, ok := v.(int64)
		if !ok {
			d.errorf(path, "want an integer, got %s", describe(v))
			return
		}
		if dst.OverflowInt(n) {
			d.errorf(path, "%d is out of range", n)
			return
		}
		dst.SetInt(n)
	case reflect.Float64:
		switch x := v.(type) {
		case float64:
			dst.SetFloat(x)
		case int64:
			dst.SetFloat(float64(x))
		default:
			d.errorf(path, "want a number, got %s", describe(v))
		}
	case reflect.Interface:
		switch v.(type) {
		case string, int64, float64, bool:
			dst.Set(reflect.ValueOf(v))
		default:
			d.errorf(path, "want a string, number or boolean, got %s", describe(v))
		}
	case reflect.Slice:
		arr, ok := v.([]any)
		if !ok {
			d.errorf(path, "want an array, got %s", describe(v))
			return
		}
		s := reflect.MakeSlice(dst.Type(), len(arr), len(arr))
		for i, item := range arr {
			d.decodeValue(fmt.Sprintf("%s[%d]", path, i), item, s.Index(i))
		}
		dst.Set(s)
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			d.errorf(path, "want a table, got %s", describe(v))
			return
		}
		out := reflect.MakeMapWithSize(dst.Type(), len(m))
		for _, k := range sortedKeys(m) {
			ev := reflect.New(dst.Type().Elem()).Elem()
			d.decodeValue(join(path, k), m[k], ev)
			out.SetMapIndex(reflect.ValueOf(k), ev)
		}
		dst.Set(out)
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			d.errorf(path, "want a table, got %s", describe(v))
			return
		}
		d.decodeStruct(path, m, dst)
	default:
		d.errorf(path, "cannot decode into %s", dst.Type())
	}
}

func (d *decoder) decodeStruct(path string, m map[string]any, dst reflect.Value) {
	t := dst.Type()
	fields := map[string]int{}
	for i := 0; i < t.NumField(); i++ {
		if tag := t.Field(i).Tag.Get("toml"); tag != "" && tag != "-" {
			fields[tag] = i
		}
	}
	for _, k := range sortedKeys(m) {
		if i, ok := fields[k]; ok {
			d.decodeValue(join(path, k), m[k], dst.Field(i))
		}
	}
}

// unknownKeys finds the keys of the document that Config does not have,
// with go-toml's DisallowUnknownFields: its StrictMissingError gives each
// with its line. The document is decoded into a mirror of Config whose
// values all take anything, so that no wrong type stops it before every
// unknown key is seen (wrong types are the decoder's to report). Each
// error names the key as the other errors do ("jobs[0].comand") and
// suggests the known key it is closest to.
func unknownKeys(file string, data []byte, lines map[string]int, schema reflect.Type) Errors {
	target := reflect.New(mirror(schema))
	err := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields().Decode(target.Interface())
	var strict *toml.StrictMissingError
	if !errors.As(err, &strict) {
		// nil; or a table where a value is expected (or the other way
		// round): the decoder reports that, and the unknown keys show once
		// it is fixed.
		return nil
	}
	var errs Errors
	for _, e := range strict.Errors {
		row, _ := e.Position()
		parts := []string(e.Key())
		if len(parts) == 0 {
			continue
		}
		// The key with its array indices: the shortest indexed key on that
		// line that names it ("jobs[0].comand", not "jobs[0].comand[0]").
		key := strings.Join(parts, ".")
		best := ""
		for k, l := range lines {
			if l == row && stripIndices(k) == key && (best == "" || len(k) < len(best)) {
				best = k
			}
		}
		if best != "" {
			key = best
		}
		msg, meant := "unknown key", ""
		names := knownKeys(schema, parts[:len(parts)-1])
		if s := suggest(parts[len(parts)-1], names); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
			if i := strings.LastIndexByte(key, '.'); i >= 0 {
				meant = key[:i+1] + s
			} else {
				meant = s
			}
		} else if len(names) > 0 {
			msg += "; known keys here: " + strings.Join(names, ", ")
		}
		errs = append(errs, &FieldError{File: file, Line: row, Key: key, Msg: msg, meant: meant})
	}
	return errs
}

var anyType = reflect.TypeOf((*any)(nil)).Elem()

// mirror is t with every value that is not a table replaced by any: the
// same keys, any values.
func mirror(t reflect.Type) reflect.Type {
	if reflect.PointerTo(t).Implements(valueDecoderType) {
		return anyType
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice:
		if t.Elem().Kind() != reflect.Struct {
			return anyType
		}
		if t.Kind() == reflect.Pointer {
			return reflect.PointerTo(mirror(t.Elem()))
		}
		return reflect.SliceOf(mirror(t.Elem()))
	case reflect.Map:
		if t.Elem().Kind() != reflect.Struct {
			return anyType
		}
		return reflect.MapOf(t.Key(), mirror(t.Elem()))
	case reflect.Struct:
		var fs []reflect.StructField
		for i := 0; i < t.NumField(); i++ {
			if f := t.Field(i); f.IsExported() {
				fs = append(fs, reflect.StructField{Name: f.Name, Type: mirror(f.Type), Tag: f.Tag})
			}
		}
		return reflect.StructOf(fs)
	}
	return anyType
}

// knownKeys lists the keys of the table at path (table names, no indices)
// in t.
func knownKeys(t reflect.Type, path []string) []string {
	for {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice:
			t = t.Elem()
			continue
		case reflect.Map:
			if len(path) == 0 {
				return nil
			}
			t, path = t.Elem(), path[1:]
			continue
		case reflect.Struct:
		default:
			return nil
		}
		if len(path) == 0 {
			break
		}
		found := false
		for i := 0; i < t.NumField(); i++ {
			if t.Field(i).Tag.Get("toml") == path[0] {
				t, path, found = t.Field(i).Type, path[1:], true
				break
			}
		}
		if !found {
			return nil
		}
	}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		if tag := t.Field(i).Tag.Get("toml"); tag != "" && tag != "-" {
			names = append(names, tag)
		}
	}
	return names
}

// stripIndices drops the array indices of a key: "jobs[0].name" → "jobs.name".
func stripIndices(k string) string {
	var b strings.Builder
	skip := false
	for _, r := range k {
		switch {
		case r == '[':
			skip = true
		case r == ']':
			skip = false
		case !skip:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func describe(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("string %q", x)
	case int64:
		return fmt.Sprintf("integer %d", x)
	case float64:
		return fmt.Sprintf("float %g", x)
	case bool:
		return fmt.Sprintf("boolean %t", x)
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case nil:
		return "nothing"
	}
	return fmt.Sprintf("a %T", v)
}

// suggest returns the known name closest to k, if it is close.
func suggest(k string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(k, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// parseDocument parses TOML into a generic tree and an index of the line of
// every key ("jobs[0].params.bs.max" → 14).
func parseDocument(file string, data []byte) (map[string]any, map[string]int, error) {
	var m map[string]any
	if err := toml.Unmarshal(data, &m); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, _ := de.Position()
			key := strings.Join(de.Key(), ".")
			return nil, nil, Errors{{File: file, Line: row, Key: key, Msg: "syntax error: " + de.Error()}}
		}
		return nil, nil, Errors{{File: file, Msg: "syntax error: " + err.Error()}}
	}
	return m, indexLines(data), nil
}

// indexLines walks the TOML syntax tree and records the line of every key,
// with array-of-tables indices resolved.
func indexLines(data []byte) map[string]int {
	idx := map[string]int{}
	arrays := map[string]int{} // resolved array-table path -> count so far
	p := unstable.Parser{}
	p.Reset(data)
	cur := ""
	// Not p.Shape: it counts the lines from the start of data at each
	// call, which made a config quadratic in its length (10,000 jobs:
	// 42 s). The newlines are found once; a key's line is a binary search.
	var newlines []int
	for i, c := range data {
		if c == '\n' {
			newlines = append(newlines, i)
		}
	}
	lineOf := func(n *unstable.Node) int {
		if n == nil || n.Raw.Length == 0 && n.Raw.Offset == 0 {
			return 0
		}
		before, _ := slices.BinarySearch(newlines, int(n.Raw.Offset))
		return 1 + before
	}
	var keyValue func(prefix string, e *unstable.Node)
	keyValue = func(prefix string, e *unstable.Node) {
		path := prefix
		line := 0
		it := e.Key()
		for it.Next() {
			k := it.Node()
			if line == 0 {
				line = lineOf(k)
			}
			path = join(path, string(k.Data))
		}
		if _, seen := idx[path]; !seen {
			idx[path] = line
		}
		v := e.Value()
		switch v.Kind {
		case unstable.InlineTable:
			ch := v.Children()
			for ch.Next() {
				if ch.Node().Kind == unstable.KeyValue {
					keyValue(path, ch.Node())
				}
			}
		case unstable.Array:
			ch := v.Children()
			i := 0
			for ch.Next() {
				n := ch.Node()
				if n.Kind == unstable.Comment {
					continue
				}
				item := fmt.Sprintf("%s[%d]", path, i)
				idx[item] = line
				if n.Kind == unstable.InlineTable {
					in := n.Children()
					for in.Next() {
						if in.Node().Kind == unstable.KeyValue {
							keyValue(item, in.Node())
						}
					}
				}
				i++
			}
		}
	}
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			var parts []*unstable.Node
			it := e.Key()
			for it.Next() {
				parts = append(parts, it.Node())
			}
			path := ""
			for i, k := range parts {
				path = join(path, string(k.Data))
				last := i == len(parts)-1
				if last && e.Kind == unstable.ArrayTable {
					arrays[path]++
					path = fmt.Sprintf("%s[%d]", path, arrays[path]-1)
				} else if n, ok := arrays[path]; ok {
					path = fmt.Sprintf("%s[%d]", path, n-1)
				}
			}
			cur = path
			if len(parts) > 0 {
				if _, seen := idx[path]; !seen {
					idx[path] = lineOf(parts[0])
				}
			}
		case unstable.KeyValue:
			keyValue(cur, e)
		}
	}
	return idx
}
