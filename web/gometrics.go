package web

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// The go_* families are those of client_golang's default Go collector
// (collectors.NewGoCollector of v1.25), with its names, help and types,
// and its values: the go_memstats_* are sums of runtime/metrics, as its
// memStatsFromRM computes them, which needs no stop-the-world
// runtime.ReadMemStats.
var (
	descGoroutines = newDesc("go_goroutines", "Number of goroutines that currently exist.", gaugeType)
	descThreads    = newDesc("go_threads", "Number of OS threads created.", gaugeType)
	descGCDuration = newDesc("go_gc_duration_seconds", "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.", summaryType)
	descLastGC     = newDesc("go_memstats_last_gc_time_seconds", "Number of seconds since 1970 of last garbage collection.", gaugeType)
	descGoInfo     = newDesc("go_info", "Information about the Go environment.", gaugeType, "version")
)

// goRuntime are the families read from runtime/metrics: each the sum of
// the runtime/metrics named.
var goRuntime = []struct {
	d   *desc
	sum []string
}{
	{newDesc("go_memstats_alloc_bytes", "Number of bytes allocated in heap and currently in use. Equals to /memory/classes/heap/objects:bytes.", gaugeType),
		[]string{"/memory/classes/heap/objects:bytes"}},
	{newDesc("go_memstats_alloc_bytes_total", "Total number of bytes allocated in heap until now, even if released already. Equals to /gc/heap/allocs:bytes.", counterType),
		[]string{"/gc/heap/allocs:bytes"}},
	{newDesc("go_memstats_sys_bytes", "Number of bytes obtained from system. Equals to /memory/classes/total:byte.", gaugeType),
		[]string{"/memory/classes/total:bytes"}},
	{newDesc("go_memstats_mallocs_total", "Total number of heap objects allocated, both live and gc-ed. Semantically a counter version for go_memstats_heap_objects gauge. Equals to /gc/heap/allocs:objects + /gc/heap/tiny/allocs:objects.", counterType),
		[]string{"/gc/heap/allocs:objects", "/gc/heap/tiny/allocs:objects"}},
	{newDesc("go_memstats_frees_total", "Total number of heap objects frees. Equals to /gc/heap/frees:objects + /gc/heap/tiny/allocs:objects.", counterType),
		[]string{"/gc/heap/frees:objects", "/gc/heap/tiny/allocs:objects"}},
	{newDesc("go_memstats_heap_alloc_bytes", "Number of heap bytes allocated and currently in use, same as go_memstats_alloc_bytes. Equals to /memory/classes/heap/objects:bytes.", gaugeType),
		[]string{"/memory/classes/heap/objects:bytes"}},
	{newDesc("go_memstats_heap_sys_bytes", "Number of heap bytes obtained from system. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes + /memory/classes/heap/released:bytes + /memory/classes/heap/free:bytes.", gaugeType),
		[]string{"/memory/classes/heap/objects:bytes", "/memory/classes/heap/unused:bytes", "/memory/classes/heap/released:bytes", "/memory/classes/heap/free:bytes"}},
	{newDesc("go_memstats_heap_idle_bytes", "Number of heap bytes waiting to be used. Equals to /memory/classes/heap/released:bytes + /memory/classes/heap/free:bytes.", gaugeType),
		[]string{"/memory/classes/heap/released:bytes", "/memory/classes/heap/free:bytes"}},
	{newDesc("go_memstats_heap_inuse_bytes", "Number of heap bytes that are in use. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes", gaugeType),
		[]string{"/memory/classes/heap/objects:bytes", "/memory/classes/heap/unused:bytes"}},
	{newDesc("go_memstats_heap_released_bytes", "Number of heap bytes released to OS. Equals to /memory/classes/heap/released:bytes.", gaugeType),
		[]string{"/memory/classes/heap/released:bytes"}},
	{newDesc("go_memstats_heap_objects", "Number of currently allocated objects. Equals to /gc/heap/objects:objects.", gaugeType),
		[]string{"/gc/heap/objects:objects"}},
	{newDesc("go_memstats_stack_inuse_bytes", "Number of bytes obtained from system for stack allocator in non-CGO environments. Equals to /memory/classes/heap/stacks:bytes.", gaugeType),
		[]string{"/memory/classes/heap/stacks:bytes"}},
	{newDesc("go_memstats_stack_sys_bytes", "Number of bytes obtained from system for stack allocator. Equals to /memory/classes/heap/stacks:bytes + /memory/classes/os-stacks:bytes.", gaugeType),
		[]string{"/memory/classes/heap/stacks:bytes", "/memory/classes/os-stacks:bytes"}},
	{newDesc("go_memstats_mspan_inuse_bytes", "Number of bytes in use by mspan structures. Equals to /memory/classes/metadata/mspan/inuse:bytes.", gaugeType),
		[]string{"/memory/classes/metadata/mspan/inuse:bytes"}},
	{newDesc("go_memstats_mspan_sys_bytes", "Number of bytes used for mspan structures obtained from system. Equals to /memory/classes/metadata/mspan/inuse:bytes + /memory/classes/metadata/mspan/free:bytes.", gaugeType),
		[]string{"/memory/classes/metadata/mspan/inuse:bytes", "/memory/classes/metadata/mspan/free:bytes"}},
	{newDesc("go_memstats_mcache_inuse_bytes", "Number of bytes in use by mcache structures. Equals to /memory/classes/metadata/mcache/inuse:bytes.", gaugeType),
		[]string{"/memory/classes/metadata/mcache/inuse:bytes"}},
	{newDesc("go_memstats_mcache_sys_bytes", "Number of bytes used for mcache structures obtained from system. Equals to /memory/classes/metadata/mcache/inuse:bytes + /memory/classes/metadata/mcache/free:bytes.", gaugeType),
		[]string{"/memory/classes/metadata/mcache/inuse:bytes", "/memory/classes/metadata/mcache/free:bytes"}},
	{newDesc("go_memstats_buck_hash_sys_bytes", "Number of bytes used by the profiling bucket hash table. Equals to /memory/classes/profiling/buckets:bytes.", gaugeType),
		[]string{"/memory/classes/profiling/buckets:bytes"}},
	{newDesc("go_memstats_gc_sys_bytes", "Number of bytes used for garbage collection system metadata. Equals to /memory/classes/metadata/other:bytes.", gaugeType),
		[]string{"/memory/classes/metadata/other:bytes"}},
	{newDesc("go_memstats_other_sys_bytes", "Number of bytes used for other system allocations. Equals to /memory/classes/other:bytes.", gaugeType),
		[]string{"/memory/classes/other:bytes"}},
	{newDesc("go_memstats_next_gc_bytes", "Number of heap bytes when next garbage collection will take place. Equals to /gc/heap/goal:bytes.", gaugeType),
		[]string{"/gc/heap/goal:bytes"}},
	// client_golang's default set of runtime/metrics, help from the runtime's.
	{newDesc("go_gc_gogc_percent", "Heap size target percentage configured by the user, otherwise 100. This value is set by the GOGC environment variable, and the runtime/debug.SetGCPercent function. Sourced from /gc/gogc:percent.", gaugeType),
		[]string{"/gc/gogc:percent"}},
	{newDesc("go_gc_gomemlimit_bytes", "Go runtime memory limit configured by the user, otherwise math.MaxInt64. This value is set by the GOMEMLIMIT environment variable, and the runtime/debug.SetMemoryLimit function. Sourced from /gc/gomemlimit:bytes.", gaugeType),
		[]string{"/gc/gomemlimit:bytes"}},
	{newDesc("go_sched_gomaxprocs_threads", "The current runtime.GOMAXPROCS setting, or the number of operating system threads that can execute user-level Go code simultaneously. Sourced from /sched/gomaxprocs:threads.", gaugeType),
		[]string{"/sched/gomaxprocs:threads"}},
}

// goRuntimeNames are the runtime/metrics goRuntime reads, each once.
var goRuntimeNames = func() []string {
	var names []string
	seen := map[string]bool{}
	for _, f := range goRuntime {
		for _, n := range f.sum {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	return names
}()

// collectGo adds the go_* families to a scrape.
func collectGo(s *scrape) {
	s.add(descGoroutines, float64(runtime.NumGoroutine()))
	threads, _ := runtime.ThreadCreateProfile(nil)
	s.add(descThreads, float64(threads))
	s.add(descGoInfo, 1, runtime.Version())

	// The pause quantiles 0, ¼, ½, ¾ and 1 of the recent collections.
	st := debug.GCStats{PauseQuantiles: make([]time.Duration, 5)}
	debug.ReadGCStats(&st)
	sv := summaryValue{sum: st.PauseTotal.Seconds(), count: uint64(st.NumGC)}
	for i, q := range st.PauseQuantiles {
		sv.quantiles = append(sv.quantiles, quantile{q: float64(i) / 4, v: q.Seconds()})
	}
	s.addSummary(descGCDuration, sv)
	s.add(descLastGC, float64(st.LastGC.UnixNano())/1e9)

	samples := make([]metrics.Sample, len(goRuntimeNames))
	for i, n := range goRuntimeNames {
		samples[i].Name = n
	}
	metrics.Read(samples)
	// Every one of them is a uint64 (KindBad, a metric this Go lacks,
	// counts as 0, as in client_golang).
	value := make(map[string]uint64, len(samples))
	for _, x := range samples {
		if x.Value.Kind() == metrics.KindUint64 {
			value[x.Name] = x.Value.Uint64()
		}
	}
	for _, f := range goRuntime {
		var v uint64
		for _, n := range f.sum {
			v += value[n]
		}
		s.add(f.d, float64(v))
	}
}
