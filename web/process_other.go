//go:build !linux

package web

// collectProcess adds nothing where there is no /proc: the process_*
// families are Linux's.
func collectProcess(*scrape) {}
