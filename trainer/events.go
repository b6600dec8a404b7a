package trainer

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
)

// What the supervisor tells its listeners: a run started, re-attached,
// raised an alert, ended, or a queued request was dropped — as typed
// facts, worded by whoever shows them.

// EventKind says what happened.
type EventKind string

// Event kinds.
const (
	EventStarted  EventKind = "started"
	EventAttached EventKind = "attached" // a trainbot observes a run again that an earlier one started
	EventAlert    EventKind = "alert"
	EventEnded    EventKind = "ended"
	EventQueue    EventKind = "queue" // a queued start request was dropped (Event.Queue says why)
)

// OutcomeRule is the Alert.Kind of an alert rule that fired (not an
// outcome: a run is never ended by a rule).
const OutcomeRule Outcome = "rule"

// Event is published to listeners when a run starts, raises an alert while
// it runs, or ends.
type Event struct {
	Kind   EventKind
	Run    *Run    // a copy
	Alert  *Alert  // EventAlert only
	Status *Status // EventEnded: the final status (metrics, rate); EventStarted, EventAttached: the first
	At     time.Time
	Job    *Job   // the run's job (shared: read only); set by the supervisor
	Retry  *Retry // EventEnded of a job with on_oom: what it did; nil otherwise
	// Resume is, at EventEnded of a job with on_failure, what it does:
	// resume from a checkpoint, or why not; nil otherwise.
	Resume *Resume
	OOM    *OOM // EventEnded out of memory: what the output said; nil when it said nothing
	// Queued is the queue entry a run was started from (EventStarted: its
	// requester has had no answer yet); nil for a run started at once.
	Queued *QueueEntry
	Queue  *QueueNotice // EventQueue
	// Fit is the memory fit of the job's runs over its batch parameter,
	// for out-of-memory alerts and ends; nil when there is no history.
	Fit *MemoryFit
}

// Alert is raised while a run is still going.
type Alert struct {
	Kind  Outcome // OutcomeOOM, OutcomeNaN or OutcomeStalled
	Text  string
	OOM   *OOM       // for OutcomeOOM
	NaN   *NaNStreak // for OutcomeNaN: what Text says, for wording it in another language
	Stall *Stall     // for a silent run's OutcomeStalled (not for a Slurm warning)
	// Unsupervised is set, with Kind OutcomeInterrupted, when the run's
	// supervisor died and processes of the run live on: the run stays
	// running (and holds its lock) until they are gone; 停止 ends them.
	Unsupervised *Unsupervised
}

// Unsupervised says what lives on of a run whose supervisor (its shim)
// died: Processes processes, of process group PGID or carrying the run's
// TRAINBOT_RUN_DIR.
type Unsupervised struct {
	RunID         int64
	SupervisorPID int
	PGID          int
	Processes     int
}

// String is the fact in the supervisor's words: "its supervisor (pid 7)
// died and 3 process(es) of process group 8 live on; 停止 5 (/stop 5) ends
// them".
func (u *Unsupervised) String() string {
	return fmt.Sprintf("its supervisor (pid %d) died and %d process(es) of process group %d live on; 停止 %d (/stop %d) ends them",
		u.SupervisorPID, u.Processes, u.PGID, u.RunID, u.RunID)
}

// NaNStreak is a loss metric's run of NaN or ±Inf points that raised a NaN
// alert: Value (NaN, +Inf or -Inf) Count times in a row, the last at Step.
type NaNStreak struct {
	Metric string
	Value  float64
	Count  int
	Step   int64
}

// nanStreakJSON is a NaNStreak as recorded (a run's end facts, run.json):
// the value as text ("NaN", "+Inf", "-Inf"), which JSON numbers cannot be.
type nanStreakJSON struct {
	Metric string `json:"metric"`
	Value  string `json:"value"`
	Count  int    `json:"count"`
	Step   int64  `json:"step"`
}

// MarshalJSON records the streak with its value as text: encoding/json
// refuses NaN and ±Inf, and an end with a NaN streak would not be recorded
// at all.
func (n NaNStreak) MarshalJSON() ([]byte, error) {
	return json.Marshal(nanStreakJSON{Metric: n.Metric, Value: strconv.FormatFloat(n.Value, 'g', -1, 64), Count: n.Count, Step: n.Step})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (n *NaNStreak) UnmarshalJSON(b []byte) error {
	var j nanStreakJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	v, err := strconv.ParseFloat(j.Value, 64)
	if err != nil {
		v = math.NaN()
	}
	*n = NaNStreak{Metric: j.Metric, Value: v, Count: j.Count, Step: j.Step}
	return nil
}

// Stall is a silence that raised a stalled alert: no output and no metric
// for Quiet, stall_after being After.
type Stall struct {
	Quiet, After time.Duration
}

// Listener receives events. It is called synchronously from supervision
// goroutines and must return quickly (queue the work).
type Listener func(Event)
