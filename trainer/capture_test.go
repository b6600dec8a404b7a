package trainer

import (
	"testing"
	"unsafe"
)

// The parse queue's bound holds for what the queued lines cost in memory,
// not only for their text: a flood of one-character lines ("1\n" printed
// 50 million times) used to queue 64 Mi lines, about 2 GB.
func TestLineQueueBoundCountsEachLine(t *testing.T) {
	const max = 1 << 20
	q := newLineQueue(max)
	n := 0
	for n <= max && q.push(outLine{text: "1"}) {
		n++
	}
	if cost := n * (int(unsafe.Sizeof(outLine{})) + 1); cost > max {
		t.Fatalf("queued %d one-byte lines, at least %d bytes, over the bound of %d", n, cost, max)
	}
	if n == 0 {
		t.Fatal("queued no line")
	}
}
