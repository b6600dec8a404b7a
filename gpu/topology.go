package gpu

// PathLevel is how close two devices are on the host's buses: the closest
// common ancestor NVML reports for them (nvmlDeviceGetTopologyCommonAncestor).
// A higher level is closer.
type PathLevel int

// Path levels, from the farthest to the closest.
const (
	PathUnknown    PathLevel = iota // NVML could not tell
	PathSystem                      // across NUMA nodes (the CPUs' interconnect)
	PathNode                        // one NUMA node, different PCIe host bridges
	PathHostBridge                  // one PCIe host bridge
	PathSwitches                    // through several PCIe switches
	PathSwitch                      // behind one PCIe switch
	PathBoard                       // on one board (a dual-GPU card)
)

// Link is how two devices are connected.
type Link struct {
	Path PathLevel
	// NVLink is true when the two can talk over NVLink, directly or
	// through NVSwitches (nvmlDeviceGetP2PStatus with the NVLink index).
	NVLink bool
}

// score ranks links for Choose: NVLink first, then the closest bus path.
func (l Link) score() int {
	s := int(l.Path)
	if l.NVLink {
		s += 8
	}
	return s
}

// Topology says how each pair of devices is connected, by UUID. It is read
// once and not changed afterwards, so snapshots share it.
type Topology struct {
	links map[[2]string]Link
}

// NewTopology returns an empty topology, for Set.
func NewTopology() *Topology { return &Topology{links: map[[2]string]Link{}} }

func pairKey(a, b string) [2]string {
	if b < a {
		a, b = b, a
	}
	return [2]string{a, b}
}

// Set records the link between the devices with UUIDs a and b (either
// order).
func (t *Topology) Set(a, b string, l Link) { t.links[pairKey(a, b)] = l }

// Between returns the link between the devices with UUIDs a and b, the
// zero Link when unknown (t may be nil).
func (t *Topology) Between(a, b string) Link {
	if t == nil {
		return Link{}
	}
	return t.links[pairKey(a, b)]
}

// Known reports whether t says anything about any pair.
func (t *Topology) Known() bool {
	if t == nil {
		return false
	}
	for _, l := range t.links {
		if l != (Link{}) {
			return true
		}
	}
	return false
}
