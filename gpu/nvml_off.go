//go:build !cgo || nonvml

package gpu

// openNVML reports that this binary was built without NVML (without cgo,
// or with the nonvml tag): trainbot then works on host memory alone.
func openNVML() (Backend, error) {
	return nil, &UnavailableError{Reason: "this trainbot was built without NVML (no cgo, or -tags nonvml)", Why: WhyNoNVML}
}
