package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/deliver"
	"github.com/trainbot/trainbot/bot/notify"
	"github.com/trainbot/trainbot/bot/push"
	"github.com/trainbot/trainbot/bot/render"
	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
)

// BenchmarkAlertLatency is the closing figure: for each of b.N runs
// of a job that prints two losses and fails, the time from the child's
// exit (the run's EndedAt, when wait(2) returned) to the push request
// reaching a fake webhook server, through the wiring of runBot: supervisor,
// store, notifier (end report with best metrics and the charts), the
// delivery pipeline (the alert is stored in the outbox before it is sent),
// push channel. It reports the median and the 90th percentile, and as a
// baseline measured in the same run, the median of a bare POST to the same
// server. The text-only variant leaves the chart out, to show what drawing
// it costs. Run it with bench/alert-latency.sh (-benchtime 100x).
func BenchmarkAlertLatency(b *testing.B) {
	b.Run("with-chart", func(b *testing.B) { benchAlertLatency(b, true) })
	b.Run("text-only", func(b *testing.B) { benchAlertLatency(b, false) })
}

func benchAlertLatency(b *testing.B, withCharts bool) {
	ctx := context.Background()
	dir := b.TempDir()
	logger := slog.New(slog.DiscardHandler)
	st, err := store.Open(dir, store.Options{Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	job := &trainer.Job{Name: "fail", Command: []string{"/bin/sh", "-c", "echo 'step 1 loss=0.5'; echo 'step 2 loss=0.4'; exit 3"}}
	sup, err := trainer.New(ctx, trainer.Options{Jobs: []*trainer.Job{job}, Recorder: st, DataDir: dir, Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	received := make(chan time.Time, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"alert":"failed"`) {
			received <- at
		}
	}))
	defer srv.Close()
	pushed, err := pushChannels(&botConfig{channels: []pushChannel{{opts: push.Options{Kind: "webhook", Name: "bench", URL: srv.URL + "/hook", PerMinute: 600, Timeout: 10 * time.Second}}}}, logger)
	if err != nil {
		b.Fatal(err)
	}
	// As runBot wires it: one pipeline, alerts stored in the outbox first.
	pipeline := deliver.New(deliver.Options{Senders: pushed.senders, Store: st, Logger: logger})
	pipeline.Start()
	defer pipeline.Close(context.Background())
	opts := notify.Options{Post: pipeline.Post, Channels: pushed.channels, Logger: logger, Extremes: st.MetricExtremes}
	if withCharts {
		opts.Charts = chartsHook(&render.Charts{Data: st}, logger)
	}
	n := notify.New(opts)
	// When the supervisor tells its listeners that the run ended: from
	// there on the time is the notifier's and the delivery's.
	endedAt := make(chan time.Time, 1)
	sup.Subscribe(func(e trainer.Event) {
		if e.Kind == trainer.EventEnded {
			select {
			case endedAt <- time.Now():
			default:
			}
		}
	})
	sup.Subscribe(n.OnEvent)
	n.Start()

	var lat, fromEvent []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := sup.Start(ctx, trainer.StartRequest{Job: "fail"})
		if err != nil {
			b.Fatal(err)
		}
		end, err := sup.WaitRun(ctx, r.ID)
		if err != nil {
			end, err = st.Run(ctx, r.ID) // it ended before WaitRun looked
			if err != nil {
				b.Fatal(err)
			}
		}
		select {
		case at := <-received:
			lat = append(lat, at.Sub(end.EndedAt))
			select {
			case ev := <-endedAt:
				fromEvent = append(fromEvent, at.Sub(ev))
			default:
			}
		case <-time.After(30 * time.Second):
			b.Fatalf("run %d: no push", r.ID)
		}
	}
	b.StopTimer()

	// Baseline: a bare POST of a small JSON body to the same server.
	client := &http.Client{Timeout: 10 * time.Second}
	var post []time.Duration
	for i := 0; i < max(b.N, 10); i++ {
		t0 := time.Now()
		resp, err := client.Post(srv.URL+"/hook", "application/json", strings.NewReader(`{"alert":"baseline"}`))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		post = append(post, time.Since(t0))
	}
	closeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	sup.Close(closeCtx)
	n.Close(closeCtx)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(percentile(lat, 50)), "ms-median")
	b.ReportMetric(ms(percentile(lat, 90)), "ms-p90")
	b.ReportMetric(ms(percentile(post, 50)), "ms-post-median")
	b.ReportMetric(ms(percentile(fromEvent, 50)), "ms-event-median")
	b.ReportMetric(float64(len(lat)), "runs")
}

// percentile is the p-th percentile (nearest rank) of ds.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(i-1, 0)]
}
