package trainer

import (
	"math/rand/v2"
	"strings"
	"testing"
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
