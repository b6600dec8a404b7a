// Package store keeps trainbot's history in SQLite (modernc.org/sqlite, pure
// Go): runs, metric points, and the tables later features use (audit,
// subscriptions, outbox, GPU samples). The schema is versioned with
// PRAGMA user_version and migrated forward on Open.
//
// Writes go through one connection; reads use a small pool of read-only
// connections (WAL lets them run beside a write). Metric points are queued
// in memory and written in batches by a background writer, so a script that
// prints thousands of lines a second costs one transaction a few times a
// second.
//
// A write that fails because the disk is full or failing is told to
// Options.OnHealth once, and its recovery once; metric points wait in the
// queue meanwhile. A database file deleted or replaced under the store is
// noticed within CheckEvery, told, and no longer written (ErrReplaced); one
// found damaged (SQLITE_CORRUPT, SQLITE_NOTADB, a truncated file) likewise
// (ErrDamaged), and Open moves a damaged file aside and starts a new one
// (HealthMovedAside): trainer restores the runs from their directories.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trainbot/trainbot/trainer"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// DBName is the database file inside the data directory.
const DBName = "trainbot.db"

// Store is the SQLite database of one data directory.
type Store struct {
	w   writeDB // the one writer connection
	r   *sql.DB // read-only pool
	log *slog.Logger

	names    sync.Map          // metric name -> id
	runNames map[[2]int64]bool // (run, name id) pairs known to run_metric_names; owned by the writer
	namesMu  sync.Mutex

	smu           sync.Mutex
	series        map[seriesKey]*sampleCount // time series of samples seen by this process
	sampleBuckets int64

	keepSamples, keepAudit time.Duration // Options.KeepSamples, KeepAudit
	maxRefused             int64         // Options.MaxRefused
	refusedAdded           atomic.Int64  // refused audit entries written since the last trim
	audits                 *auditQueue   // AuditLater's
	amu                    sync.RWMutex  // held to queue an entry; written to close the queue
	auditsClosed           bool

	pmu     sync.Mutex
	pending []pendingPoint
	// spare is the array of the last whole batch written, cleared, for the
	// queue to fill again: a burst reuses two arrays instead of growing a
	// new one (10 MB) for every batch (#35).
	spare      []pendingPoint
	queued     int64         // points ever queued
	taken      int64         // points ever taken for writing
	thins      []pendingThin // at most one per (run, metric)
	dropped    int64
	dropping   bool // points were dropped since the queue last emptied
	maxPending int
	// seq is the last metrics.seq written; owned by the writer. It starts
	// at the Unix time in nanoseconds when the store opened: a run's points
	// can be written by several trainbot processes one after the other (a
	// bot that re-attaches after a restart), and a later process starts
	// past anything an earlier one wrote (no process writes a point per
	// nanosecond), so (run, name, step, seq) stays unique and in arrival
	// order without scanning the table for its maximum at start-up.
	seq       int64
	batchSize int // batchSize, smaller in tests
	kick      chan struct{}
	writing   chan struct{} // held while a batch of points is written (the writer's, or a Flush's)
	flushing  atomic.Int32  // Flushes waiting or writing: the writer yields
	stopped   chan struct{} // closed when the writer has returned
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closed    bool

	retrying bool    // a batch of points went back to the queue; owned by the writer
	health   *health // what the writes say, and whether trainbot.db is still the file opened
}

// Options tune a Store.
type Options struct {
	Logger *slog.Logger
	// FlushEvery is the longest a queued point waits for the disk. Default 500 ms.
	FlushEvery time.Duration
	// MaxPending bounds queued points; beyond it points are dropped and
	// counted (the run log still has them). Default 1,000,000.
	MaxPending int
	// OnHealth, when set, hears when writes start failing because the disk
	// is full or failing, when they succeed again, and when the database
	// file was deleted or replaced: changes only, in order, from one
	// goroutine. It must not block long.
	OnHealth func(HealthEvent)
	// CheckEvery is how often the database file is compared with the one
	// opened and its header looked at (also right after a failed write): a
	// stat and a 100-byte read. Default 5 s.
	CheckEvery time.Duration
	// RecoverAfter is how long writes must go without a disk fault before
	// a success counts as recovered (a small write may fit where a batch
	// does not). Default 10 s.
	RecoverAfter time.Duration
	// SampleBuckets is the most buckets a time series of samples (a
	// device's, a run's memory) is cut into when it is thinned, which it
	// is once it holds 5 rows per bucket (a run's memory: 7). Default
	// trainer.MaxBuckets (10,000), as for metric points.
	SampleBuckets int
	// KeepSamples is how long device samples and runs' memory samples are
	// kept (0: forever); KeepAudit the same for the audit. Runs, their
	// points and their peak memory are kept forever. Older rows are
	// deleted in the background, at PruneEvery (default 1 h) from a first
	// pass 30 s after Open.
	KeepSamples, KeepAudit time.Duration
	PruneEvery             time.Duration
	// MaxRefused bounds the audit's refused entries (what was not carried
	// out: strangers, viewers, unknown words, edits), so that a flood of
	// them cannot grow the database without limit: past it the oldest
	// refused entries go (checked every refusedTrimEvery of them and at
	// each prune). The entries of what was carried out are kept by
	// KeepAudit alone: a flood cannot push them out. Default
	// DefaultMaxRefused; negative: no bound.
	MaxRefused int
	// ThinEarlierRuns thins, once per database and in the background, the
	// NaN and ±Inf points that runs recorded by earlier versions stored
	// one per step (thinOldNonFinite). For the long-lived bot: a short
	// command would pay for the pass and interrupt it.
	ThinEarlierRuns bool
	// MoveAsideDamaged makes Open move a damaged database file aside
	// (trainbot.db.damaged-TIME) and start a new one, told as
	// HealthMovedAside: for the bot, whose supervisor then restores the
	// runs from their directories. Without it Open refuses a damaged file
	// (ErrDamaged), so that a command that only reads does not empty the
	// history before the bot can rebuild it.
	MoveAsideDamaged bool
}

// Open opens (creating if needed) the database in dir, migrates it and
// starts the background point writer. Close stops it.
func Open(dir string, opts Options) (*Store, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.FlushEvery <= 0 {
		opts.FlushEvery = 500 * time.Millisecond
	}
	if opts.MaxPending <= 0 {
		opts.MaxPending = 1_000_000
	}
	if opts.CheckEvery <= 0 {
		opts.CheckEvery = 5 * time.Second
	}
	if opts.RecoverAfter <= 0 {
		opts.RecoverAfter = 10 * time.Second
	}
	if opts.SampleBuckets <= 0 {
		opts.SampleBuckets = trainer.MaxBuckets
	}
	if opts.MaxRefused == 0 {
		opts.MaxRefused = DefaultMaxRefused
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	path := filepath.Join(dir, DBName)
	var movedAside []HealthEvent
	damage, short := fileDamage(path)
	if short {
		// Another process's checkpoint may be growing the file: only a
		// second look that agrees makes it damaged.
		time.Sleep(250 * time.Millisecond)
		damage, _ = fileDamage(path)
	}
	if damage != nil {
		if !opts.MoveAsideDamaged {
			return nil, fmt.Errorf("open store: %w: %v", ErrDamaged, damage)
		}
		ev, err := moveAside(path, damage)
		if err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
		movedAside = append(movedAside, ev)
	}
	w, err := openWriter(path)
	if err != nil && damagedErr(err) && opts.MoveAsideDamaged {
		// Damaged beyond its header: moved aside, and a new one.
		ev, merr := moveAside(path, err)
		if merr != nil {
			return nil, fmt.Errorf("open store: %w", merr)
		}
		movedAside = append(movedAside, ev)
		w, err = openWriter(path)
	}
	if err != nil {
		return nil, err
	}
	r, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	r.SetMaxOpenConns(4)
	h, err := newHealth(dir, path, opts, opts.Logger)
	if err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Store{w: writeDB{DB: w, h: h}, r: r, log: opts.Logger, health: h, maxPending: opts.MaxPending, batchSize: batchSize, runNames: map[[2]int64]bool{},
		sampleBuckets: int64(opts.SampleBuckets), seq: time.Now().UnixNano(), keepSamples: opts.KeepSamples, keepAudit: opts.KeepAudit, maxRefused: int64(opts.MaxRefused),
		kick: make(chan struct{}, 1), writing: make(chan struct{}, 1), stopped: make(chan struct{}), cancel: cancel}
	s.wg.Add(1)
	go s.writer(ctx, opts.FlushEvery)
	s.startAuditQueue()
	if opts.KeepSamples > 0 || opts.KeepAudit > 0 || opts.MaxRefused > 0 {
		if opts.PruneEvery <= 0 {
			opts.PruneEvery = time.Hour
		}
		s.wg.Add(1)
		go s.pruner(ctx, min(30*time.Second, opts.PruneEvery), opts.PruneEvery)
	}
	if len(movedAside) > 0 {
		h.mu.Lock()
		h.events = append(h.events, movedAside...)
		h.mu.Unlock()
		h.kick <- struct{}{}
	}
	s.wg.Go(func() { h.watch(ctx, opts.CheckEvery) })
	if _, done, err := s.Get(ctx, nonFiniteThinnedKey); err == nil && !done && opts.ThinEarlierRuns {
		s.wg.Go(func() { s.thinOldNonFinite(ctx) })
	}
	return s, nil
}

// openWriter opens the write connection of the database at path and
// migrates it.
func openWriter(path string) (*sql.DB, error) {
	w, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	w.SetMaxOpenConns(1)
	if err := migrate(w); err != nil {
		w.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return w, nil
}

// moveAside renames a damaged database file (and its -wal and -shm) to
// trainbot.db.damaged-TIME, so that a new one can start and the damaged
// one is kept for whoever wants to look at it.
func moveAside(path string, damage error) (HealthEvent, error) {
	aside := path + ".damaged-" + time.Now().UTC().Format("20060102T150405Z")
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Rename(path+suffix, aside+suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return HealthEvent{}, fmt.Errorf("move the damaged %s aside: %w", path+suffix, err)
		}
	}
	return HealthEvent{Kind: HealthMovedAside, Dir: filepath.Dir(path), Err: fmt.Errorf("%v; moved aside to %s", damage, aside)}, nil
}

func dsn(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(NORMAL)")
		q.Set("_txlock", "immediate")
	}
	return "file:" + path + "?" + q.Encode()
}

// Close writes the queued points and closes the database.
func (s *Store) Close() error {
	s.pmu.Lock()
	if s.closed {
		s.pmu.Unlock()
		return nil
	}
	s.closed = true
	s.pmu.Unlock()
	s.closeAudits()
	ferr := s.Flush(context.Background())
	if ferr != nil {
		s.pmu.Lock()
		if n := len(s.pending); n > 0 {
			ferr = fmt.Errorf("%d metric points not written: %w", n, ferr)
		}
		s.pmu.Unlock()
	}
	s.cancel()
	s.wg.Wait()
	return errors.Join(ferr, s.r.Close(), s.w.Close())
}

var migrations = []string{
	// 1: the foundation schema.
	`
CREATE TABLE runs (
	id INTEGER PRIMARY KEY,
	job TEXT NOT NULL,
	params TEXT NOT NULL DEFAULT '{}',
	command TEXT NOT NULL DEFAULT '[]',
	state TEXT NOT NULL,
	outcome TEXT NOT NULL,
	detail TEXT NOT NULL DEFAULT '',
	exit_code INTEGER,
	pid INTEGER NOT NULL DEFAULT 0,
	supervisor_pid INTEGER NOT NULL DEFAULT 0,
	started_at INTEGER NOT NULL,
	ended_at INTEGER,
	log_path TEXT NOT NULL DEFAULT '',
	started_by TEXT NOT NULL DEFAULT '',
	origin TEXT NOT NULL DEFAULT '',
	stopped_by TEXT NOT NULL DEFAULT '',
	steps INTEGER NOT NULL DEFAULT 0,
	total_steps INTEGER NOT NULL DEFAULT 0,
	peak_gpu_mem_bytes INTEGER,
	peak_host_mem_bytes INTEGER
);
CREATE INDEX runs_state ON runs(state);
CREATE INDEX runs_job ON runs(job, id);

CREATE TABLE metric_names (
	id INTEGER PRIMARY KEY,
	name TEXT NOT NULL UNIQUE
);

-- One B-tree clustered on what every query asks for (a run's series of one
-- metric, in step order). seq orders points of the same step by arrival.
-- value NULL means NaN (SQLite stores NaN as NULL).
CREATE TABLE metrics (
	run_id INTEGER NOT NULL,
	name_id INTEGER NOT NULL,
	step INTEGER NOT NULL,
	seq INTEGER NOT NULL,
	epoch REAL,
	value REAL,
	t INTEGER NOT NULL,
	PRIMARY KEY (run_id, name_id, step, seq)
) WITHOUT ROWID;

-- Which metrics a run has (kept by the writer: no scan of the points).
CREATE TABLE run_metric_names (
	run_id INTEGER NOT NULL,
	name_id INTEGER NOT NULL,
	PRIMARY KEY (run_id, name_id)
) WITHOUT ROWID;

CREATE TABLE audit (
	id INTEGER PRIMARY KEY,
	t INTEGER NOT NULL,
	transport TEXT NOT NULL,
	chat_id TEXT NOT NULL,
	user_id TEXT NOT NULL,
	user_name TEXT NOT NULL DEFAULT '',
	text TEXT NOT NULL,
	command TEXT NOT NULL DEFAULT '',
	allowed INTEGER NOT NULL,
	reason TEXT NOT NULL DEFAULT ''
);

CREATE TABLE subscriptions (
	transport TEXT NOT NULL,
	chat_id TEXT NOT NULL,
	subscribed INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (transport, chat_id)
);

CREATE TABLE kv (
	key TEXT PRIMARY KEY,
	value TEXT NOT NULL
);
`,
	// 2: memory and accelerator samples.
	`
CREATE TABLE device_samples (
	t INTEGER NOT NULL,
	device INTEGER NOT NULL,
	uuid TEXT NOT NULL DEFAULT '',
	name TEXT NOT NULL DEFAULT '',
	mem_used INTEGER NOT NULL,
	mem_total INTEGER NOT NULL,
	util INTEGER NOT NULL DEFAULT -1,
	temp INTEGER NOT NULL DEFAULT -1,
	power_mw INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX device_samples_t ON device_samples(device, t);

-- What one run held at one instant: GPU memory of its processes (NULL
-- without a GPU) and resident host memory of its process tree.
CREATE TABLE run_memory (
	run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	t INTEGER NOT NULL,
	gpu_bytes INTEGER,
	gpu_total INTEGER,
	host_bytes INTEGER
);
CREATE INDEX run_memory_run_t ON run_memory(run_id, t);
`,
	// 3: the outbox: replies that must be delivered (alerts), stored before
	// they are sent and kept until delivered, so they survive a restart.
	`
CREATE TABLE outbox (
	id INTEGER PRIMARY KEY,
	transport TEXT NOT NULL,
	chat_id TEXT NOT NULL,
	key TEXT NOT NULL,
	payload BLOB NOT NULL,
	created_at INTEGER NOT NULL,
	attempts INTEGER NOT NULL DEFAULT 0,
	next_at INTEGER NOT NULL,
	last_error TEXT NOT NULL DEFAULT '',
	sent_at INTEGER,
	-- held until then (quiet hours): unlike next_at, it does not hold back
	-- the chat's later items
	not_before INTEGER NOT NULL DEFAULT 0,
	-- 1 when the transport refused it for good (a bad webhook key)
	failed INTEGER NOT NULL DEFAULT 0,
	UNIQUE (transport, chat_id, key)
);
CREATE INDEX outbox_pending ON outbox(transport, sent_at, chat_id, id);
`,
	// 4: a run started again after out-of-memory (on_oom) names the run it retries.
	`
ALTER TABLE runs ADD COLUMN retry_of INTEGER;
`,
	// 5: runs outlive trainbot: which runner owns the run, and how far the
	// bot has read its log and its metrics file (written in the same
	// transaction as the points read from them, so a restart resumes
	// exactly there). Runs of earlier versions have runner ''.
	`
ALTER TABLE runs ADD COLUMN runner TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN log_offset INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN metrics_offset INTEGER NOT NULL DEFAULT 0;
`,
	// 6: runs on a Slurm cluster: the batch job's id (NULL for local runs)
	// and the nodes it runs on.
	`
ALTER TABLE runs ADD COLUMN slurm_job_id TEXT;
ALTER TABLE runs ADD COLUMN node TEXT NOT NULL DEFAULT '';
`,
	// 7: the audit names the run a command touched (审计, trainbot audit);
	// NULL for none and for entries of earlier versions.
	`
ALTER TABLE audit ADD COLUMN run_id INTEGER;
CREATE INDEX audit_user ON audit(user_id, id);
`,
	// 8: TensorBoard event files as a metric source: where each point was
	// read (0 the output or the metrics file, 1 an event file, which wins
	// at the same metric and step), and how far each event file of a run
	// is read (written in the transaction of the points read from it).
	`
ALTER TABLE metrics ADD COLUMN src INTEGER NOT NULL DEFAULT 0;
CREATE TABLE event_files (
	run_id INTEGER NOT NULL,
	path TEXT NOT NULL,
	offset INTEGER NOT NULL,
	PRIMARY KEY (run_id, path)
) WITHOUT ROWID;
`,
	// 9: what a daily user misses: a note per run, and the queue of
	// start requests waiting for their job's lock (开始 while it is held).
	`
ALTER TABLE runs ADD COLUMN note TEXT NOT NULL DEFAULT '';
CREATE TABLE queue (
	id INTEGER PRIMARY KEY,
	job TEXT NOT NULL,
	params TEXT NOT NULL DEFAULT '{}',
	note TEXT NOT NULL DEFAULT '',
	requested_by TEXT NOT NULL,
	user_id TEXT NOT NULL DEFAULT '',
	origin TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL
);
`,
	// 10: how a run's peak host memory was measured (trainer.Run.PeakHostHow):
	// '' sampled, 'main' the high-water mark of its one process, 'tree-sum'
	// the sum of its processes' high-water marks, 'cgroup' memory.peak.
	`
ALTER TABLE runs ADD COLUMN peak_host_how TEXT NOT NULL DEFAULT '';
`,
	// 11: the audit's refused entries by age, so that keeping them within
	// Options.MaxRefused reads no other row.
	`
CREATE INDEX audit_refused ON audit(id) WHERE allowed = 0;
`,
	// 12: how a run ended, as facts (trainer.EndFacts, JSON): Detail is
	// made from them, and a chat words them in its language. Runs of
	// earlier versions have none: their detail shows as recorded.
	`
ALTER TABLE runs ADD COLUMN end_facts TEXT;
`,
	// 13: the GPUs a run was given (trainer.Run.GPUs, JSON: index, uuid,
	// name); NULL for runs that asked for none, and before.
	`
ALTER TABLE runs ADD COLUMN gpus TEXT;
`,
	// 14: where a run on another host runs (trainer.Run.Host, a [[hosts]]
	// name) and its directory there (RemoteDir); '' for runs on this host.
	`
ALTER TABLE runs ADD COLUMN host TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN remote_dir TEXT NOT NULL DEFAULT '';
ALTER TABLE queue ADD COLUMN host TEXT NOT NULL DEFAULT '';
`,
	// 15: the host's boot id when a local run started (trainer.Run.BootID:
	// a reboot while it ran ends it as host_reboot) and the run a run
	// resumes from its checkpoint (on_failure; NULL for none).
	`
ALTER TABLE runs ADD COLUMN boot_id TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN resumed_from INTEGER;
`,
	// 16: the live changes of runs (调参, trainer.LiveChange), drawn on
	// their charts. values is JSON, name to canonical text.
	`
CREATE TABLE run_changes (
	run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	version INTEGER NOT NULL,
	at INTEGER NOT NULL,
	step INTEGER NOT NULL,
	by TEXT NOT NULL DEFAULT '',
	"values" TEXT NOT NULL,
	signal INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (run_id, version)
);
`,
	// 17: the declared min and max of a run's numeric parameters when it
	// started (trainer.Run.ParamRanges, JSON: name to {"min","max"}), so a
	// memory fit keeps under the max without the config; NULL for none,
	// and before.
	`
ALTER TABLE runs ADD COLUMN param_ranges TEXT;
`,
}

// migrate brings the schema to the latest version, one migration per
// transaction. Each reads the version inside its transaction (BEGIN
// IMMEDIATE: one writer at a time), so that two trainbot processes opening
// the same directory at once do not both apply a migration.
func migrate(db *sql.DB) error {
	for {
		tx, err := db.Begin()
		if err != nil {
			return err
		}
		var v int
		if err := tx.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
			tx.Rollback()
			return fmt.Errorf("read schema version: %w", err)
		}
		if v > len(migrations) {
			tx.Rollback()
			return fmt.Errorf("database schema version %d is newer than this trainbot (%d): upgrade trainbot", v, len(migrations))
		}
		if v == len(migrations) {
			return tx.Rollback()
		}
		if _, err := tx.Exec(migrations[v]); err != nil {
			tx.Rollback()
			return fmt.Errorf("migrate to schema %d: %w", v+1, err)
		}
		if _, err := tx.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, v+1)); err != nil {
			tx.Rollback()
			return fmt.Errorf("migrate to schema %d: %w", v+1, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migrate to schema %d: %w", v+1, err)
		}
	}
}

// SchemaVersion returns the database's schema version.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.r.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v)
	return v, err
}

// Get reads a value of the small key-value table ("" and false when absent).
func (s *Store) Get(ctx context.Context, key string) (string, bool, error) {
	var v string
	err := s.r.QueryRowContext(ctx, `SELECT value FROM kv WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return v, err == nil, err
}

// Set writes a value of the key-value table.
func (s *Store) Set(ctx context.Context, key, value string) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO kv(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`, key, value)
	return err
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v int64) time.Time { return time.UnixMilli(v) }
