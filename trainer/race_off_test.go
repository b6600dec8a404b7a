//go:build !race

package trainer

// RaceEnabled is true in a test binary built with -race (exported for
// package trainer_test).
const RaceEnabled = false
