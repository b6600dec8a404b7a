package logparse

import "strconv"

// Distributed runs: every rank prints, and launchers say which rank printed
// a line with a prefix. Metrics are read from one rank so that a series
// does not zig-zag between ranks: for each metric, the lowest rank that
// prints it (rank 0, or the last pipeline stage for a loss only it
// computes). A line without a prefix is rank 0's. Each rank has its own
// step, since ranks print at their own pace.

// maxRanks bounds the ranks followed; lines of further ranks are not read.
const maxRanks = 1024

// rankPrefix reads and removes a launcher's rank prefix:
//   - torchrun --tee: "[default0]:", or with --role, "[rank0]:",
//     "[trainer3]:" (the role, then the local rank);
//   - OpenMPI --tag-output: "[1,3]<stdout>:" (job, rank);
//   - srun --label: "3: ", once the output shows it (see srunLabels).
func (p *Parser) rankPrefix(s string) (int32, string, bool) {
	switch c := s[0]; {
	case c == '[':
		if r, n, ok := bracketRank(s); ok {
			return r, trimLeftSpaces(s[n:]), true
		}
	case c >= '0' && c <= '9':
		if r, n, ok := p.srun.label(s); ok {
			return r, s[n:], true
		}
	}
	return 0, s, false
}

// bracketRank reads "[role7]:" or "[1,7]<stdout>:" at the start of s and
// returns the rank and the length of the prefix.
func bracketRank(s string) (int32, int, bool) {
	i := 1
	for i < len(s) && i < 33 && (isLetter(s[i]) || s[i] == '_' || s[i] == '-') {
		i++
	}
	role := s[1:i]
	if role == "" { // OpenMPI: "[1,7]<stdout>:"
		_, j, ok := scanUint(s, 1)
		if !ok || j >= len(s) || s[j] != ',' {
			return 0, 0, false
		}
		r, k, ok := scanRank(s, j+1)
		if !ok || k >= len(s) || s[k] != ']' {
			return 0, 0, false
		}
		rest := s[k+1:]
		for _, tag := range []string{"<stdout>:", "<stderr>:"} {
			if len(rest) >= len(tag) && rest[:len(tag)] == tag {
				return r, k + 1 + len(tag), true
			}
		}
		return 0, 0, false
	}
	r, j, ok := scanRank(s, i)
	if !ok || j+1 >= len(s) || s[j] != ']' || s[j+1] != ':' {
		return 0, 0, false
	}
	// "[step100]:" or "[epoch2]:" is progress, not a role.
	var buf [32]byte
	switch classify(appendLower(buf[:0], role)) {
	case keyStep, keyEpoch, keyBatch, keyTotalSteps, keyTotalEpochs:
		return 0, 0, false
	}
	return r, j + 2, true
}

// scanRank reads a rank: up to six digits.
func scanRank(s string, i int) (int32, int, bool) {
	j := i
	for j < len(s) && s[j] >= '0' && s[j] <= '9' && j-i < 7 {
		j++
	}
	if j == i || j-i > 6 {
		return 0, i, false
	}
	n, err := strconv.Atoi(s[i:j])
	if err != nil {
		return 0, i, false
	}
	return int32(n), j, true
}

func trimLeftSpaces(s string) string {
	return s[skipSpaces(s, 0):]
}

// srunLabels recognises srun --label's "3: " prefixes. A script may print
// "3: …" lines of its own (an epoch, an item of a list), so labels count
// as ranks only once the output shows ranks interleaving: a label lower
// than the one before it, twice. Until then lines are read as they are.
type srunLabels struct {
	on        bool
	last      int32
	started   bool
	decreases int
}

// label reads "N: " at the start of s; it returns the rank and the length
// of the prefix when labels are known to be ranks.
func (l *srunLabels) label(s string) (int32, int, bool) {
	r, j, ok := scanRank(s, 0)
	if !ok || j+1 >= len(s) || s[j] != ':' || s[j+1] != ' ' {
		return 0, 0, false
	}
	if !l.on {
		if l.started && r < l.last {
			l.decreases++
			l.on = l.decreases >= 2
		}
		l.last, l.started = r, true
		if !l.on {
			return 0, 0, false
		}
	}
	return r, j + 2, true
}

// rankTrack returns the track of a rank, nil beyond maxRanks.
func (p *Parser) rankTrack(r int32) *track {
	if r == 0 {
		return &p.track
	}
	if t, ok := p.ranks[r]; ok {
		return t
	}
	if len(p.ranks) >= maxRanks {
		return nil
	}
	if p.ranks == nil {
		p.ranks = make(map[int32]*track)
	}
	t := &track{}
	p.ranks[r] = t
	return t
}

// progressTrack is the track Progress reports: rank 0's, or when rank 0
// has shown no progress, the lowest rank's that has.
func (p *Parser) progressTrack() *track {
	if p.track.started() || len(p.ranks) == 0 {
		return &p.track
	}
	var best *track
	bestRank := int32(-1)
	for r, t := range p.ranks {
		if t.started() && (best == nil || r < bestRank) {
			best, bestRank = t, r
		}
	}
	if best == nil {
		return &p.track
	}
	return best
}

func (t *track) started() bool {
	return t.step != 0 || t.epochKnown || t.keyTotal != 0 || t.derivedTotal != 0 || t.totalEpochs != 0
}

// owns reports whether a metric of a rank is read: rank 0 owns every name
// it reports; another rank owns a name no lower rank reports once it has
// reported it twice in a row (at the start of a run rank 1 often prints
// before rank 0 does: its first value is not taken). Names beyond
// maxInterned (id -1) are read from rank 0 only.
func (p *Parser) owns(id, rank int32) bool {
	if id < 0 {
		return rank == 0
	}
	switch o := p.owners[id]; {
	case rank == o:
		return true
	case rank > o:
		return false
	case rank == 0 || p.pending[id] == rank:
		p.owners[id] = rank
		return true
	default:
		p.pending[id] = rank
		return false
	}
}

// rankName names a metric of a rank that does not own it: "rank1/loss"
// when all ranks are kept, "" (left out) otherwise.
func (p *Parser) rankName(rank int32, name string) string {
	if !p.allRanks {
		return ""
	}
	b := append(p.nameBuf[:0], "rank"...)
	b = strconv.AppendInt(b, int64(rank), 10)
	b = append(b, '/')
	b = append(b, name...)
	p.nameBuf = b
	if !validName(b) {
		return ""
	}
	s, _ := p.intern(b)
	return s
}
