//go:build !unix

package plots

import "os"

// mapFile reads a file (mapping it is left to unix systems).
func mapFile(path string) (data []byte, unmap func(), err error) {
	data, err = os.ReadFile(path)
	return data, func() {}, err
}
