package trainer

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// EnvBootIDFile names a file read instead of the kernel's boot id (tests
// simulate a reboot with it).
const EnvBootIDFile = "TRAINBOT_BOOT_ID_FILE"

// BootID is this host's boot id (a new one at every boot), "" when it
// cannot be read.
func BootID() string {
	path := os.Getenv(EnvBootIDFile)
	if path == "" {
		path = "/proc/sys/kernel/random/boot_id"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Reboot is the evidence of a host reboot during a run (WhyHostReboot).
type Reboot struct {
	// BootIDAtStart and BootIDNow are the host's boot ids when the run
	// started and when its end was found.
	BootIDAtStart string `json:"boot_id_at_start"`
	BootIDNow     string `json:"boot_id_now"`
	// BootedAt is when the host booted (/proc/stat btime); zero unknown.
	BootedAt time.Time `json:"booted_at,omitzero"`
}

func (r *Reboot) String() string {
	s := fmt.Sprintf("the host rebooted while the run ran (boot id %s at its start, %s now", short(r.BootIDAtStart), short(r.BootIDNow))
	if !r.BootedAt.IsZero() {
		s += ", booted " + r.BootedAt.Format(time.RFC3339)
	}
	return s + ")"
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
