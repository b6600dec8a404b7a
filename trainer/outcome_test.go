package trainer

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/trainbot/trainbot/trainer/logparse"
)

// mayBeOOMByByte is mayBeOOM as it was first written (a pass over every
// byte): the reference the searched version must agree with.
func mayBeOOMByByte(line string) bool {
	for i := range len(line) {
		rest := line[i:]
		for _, w := range []string{"emory", "EMORY", "OOM", "alloc", "ALLOC", "RESOURCE_EXHAUSTED", "ResourceExhausted"} {
			if strings.HasPrefix(rest, w) {
				return true
			}
		}
	}
	return false
}

// mayBeOOM, which looks only around each 'o' and 'O', finds the words
// wherever the byte-by-byte pass finds them: at the start and end of a
// line, overlapping, cut short, among lookalikes.
func TestMayBeOOMAgreesWithTheBytePass(t *testing.T) {
	lines := []string{"", "o", "O", "OOM", "OO", "xOOM", "OOOM", "memory", "emor", "MEMORY", "EMOR", "alloc", "allo", "ALLOC",
		"RESOURCE_EXHAUSTED", "RESOURCE_EXHAUSTE", "ResourceExhausted", "Resource", "step=1 loss=0.5",
		"Epoch [1/10], Step [5/100], Loss: 0.1", "CUDA out of memory. Tried to allocate 2.00 GiB", "ooo", "aalloc", "eemory"}
	pieces := []string{"o", "O", "e", "E", "m", "M", "r", "R", "y", "Y", "a", "A", "l", "L", "c", "C", "s", "S", "u", "U", "_", "x",
		"emory", "EMORY", "OOM", "alloc", "ALLOC", "RESOURCE_EXHAUSTED", "ResourceExhausted", "emor", "EMOR", "OO", "allo", "ALLO",
		"RESOURCE", "Resource", "Exhausted", "EXHAUSTED", " "}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200_000 {
		var b strings.Builder
		for range rng.IntN(8) {
			p := pieces[rng.IntN(len(pieces))]
			if rng.IntN(4) == 0 && len(p) > 1 {
				p = p[:1+rng.IntN(len(p)-1)] // cut short
			}
			b.WriteString(p)
		}
		lines = append(lines, b.String())
	}
	for _, l := range lines {
		if got, want := mayBeOOM(l), mayBeOOMByByte(l); got != want {
			t.Fatalf("mayBeOOM(%q) = %v, want %v", l, got, want)
		}
	}
}

// TestDetectOOMByLayout holds the supervisor's detectOOM, which decides
// once per layout of lines, to DetectOOM on every line: streams of
// training lines (some with the words DetectOOM looks for, "memory" and
// "alloc", in a metric's name) with out-of-memory errors among them, in
// more layouts than detectOOM remembers.
func TestDetectOOMByLayout(t *testing.T) {
	kinds := []string{
		"step=%d loss=0.%d",
		"Epoch [1/10], Step [%d/600], Loss: 0.%d",
		"step=%d gpu_memory=%d alloc=7",
		"it %d: MemoryError count=%d",
		"RuntimeError: CUDA out of memory. Tried to allocate %d.00 MiB (GPU 0; 7.79 GiB total capacity; %d.00 MiB free)",
		"CUBLAS_STATUS_ALLOC_FAILED at %d:%d",
	}
	for k := range maxOOMFree + 8 { // layouts of their own, to overflow detectOOM's map
		kinds = append(kinds, fmt.Sprintf("phase%c step=%%d loss=0.%%d", 'a'+k%26)+strings.Repeat(" ", k/26))
	}
	a := &active{}
	p := &logparse.Parser{}
	rng := rand.New(rand.NewPCG(3, 4))
	cached, oom := 0, 0
	for i := range 20000 {
		kind := kinds[rng.IntN(6)] // half the lines of the first six
		if rng.IntN(2) == 0 {
			kind = kinds[rng.IntN(len(kinds))]
		}
		line := fmt.Sprintf(kind, 100+i%900, 1000+rng.IntN(9000))
		_, rd := p.AppendRead(nil, []byte(line))
		if rd.Layout != 0 && a.oomFree[rd.Layout] {
			cached++
		}
		got, gotOK := a.detectOOM(line, rd.Layout)
		want, wantOK := DetectOOM(line)
		if gotOK != wantOK || gotOK && *got != *want {
			t.Fatalf("line %d %q (layout %d): detectOOM %v %+v, DetectOOM %v %+v", i, line, rd.Layout, gotOK, got, wantOK, want)
		}
		if gotOK {
			oom++
		}
		if len(a.oomFree) > maxOOMFree {
			t.Fatalf("detectOOM remembers %d layouts, at most %d", len(a.oomFree), maxOOMFree)
		}
	}
	if cached < 8000 || oom < 2000 {
		t.Errorf("%d lines decided by their layout, %d out-of-memory errors: the test reads too few", cached, oom)
	}
}
