package shimctl

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// ReadState reads a run directory's state.json.
func ReadState(runDir string) (*State, error) {
	b, err := os.ReadFile(filepath.Join(runDir, StateFile))
	if err != nil {
		return nil, err
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Join(runDir, StateFile), err)
	}
	return &st, nil
}
