package web

import (
	"context"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/logparse"
)

// BenchmarkPointsOfTenMillionSteps: /api/runs/ID/points of a 10⁷-step run
// over HTTP from a real store: its whole range (from the per-pixel
// summary), the same with the summary built again each time (the first
// chart of a metric, or a running run's, which is rebuilt after
// summaryAge), a zoom the summary serves, and a narrow zoom read from the
// store. The store holds what the recorder's thinning leaves of 10⁷ steps
// (trainer.thin: buckets of 1,000 steps, their first, minimum, maximum
// and last points: 40,000 rows). Each answer has at most 2 × width points
// (checked).
func BenchmarkPointsOfTenMillionSteps(b *testing.B) {
	s := newSite(b)
	ctx := context.Background()
	r := &trainer.Run{Job: "big", State: trainer.StateEnded, Outcome: trainer.OutcomeFinished, StartedAt: time.Now().Add(-time.Hour), EndedAt: time.Now(), Steps: 10_000_000}
	id, err := s.st.CreateRun(ctx, r)
	if err != nil {
		b.Fatal(err)
	}
	const steps, width = 10_000_000, int64(trainer.MaxBuckets)
	bucket := int64(steps) / width
	now := time.Now()
	loss := func(step int64) float64 { return 3*math.Exp(-float64(step)/2e6) + 0.2*math.Sin(float64(step)/977) }
	for lo := int64(0); lo < steps; lo += 1000 * bucket {
		var pts []trainer.TimedPoint
		for b0 := lo; b0 < min(lo+1000*bucket, steps); b0 += bucket {
			for _, step := range []int64{b0 + 1, b0 + bucket/3, b0 + 2*bucket/3, b0 + bucket} {
				pts = append(pts, trainer.TimedPoint{Point: logparse.Point{Step: step, Epoch: math.NaN(), Name: "loss", Value: loss(step)}, At: now})
			}
		}
		s.st.AddPoints(id, pts)
	}
	if err := s.st.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	tok := url.QueryEscape(s.token(Scope(id), time.Hour))
	client := &http.Client{Timeout: 10 * time.Second}
	for _, bc := range []struct {
		name, q string
		cold    bool
	}{
		{"all-390px", "width=390", false},
		{"all-1200px", "width=1200", false},
		{"all-390px-cold", "width=390", true},
		{"zoom-1e6-steps-390px", "from=4000000&to=5000000&width=390", false},
		{"zoom-1e5-steps-390px", "from=4000000&to=4100000&width=390", false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			u := s.base + "/api/runs/" + strconv.FormatInt(id, 10) + "/points?metric=loss&" + bc.q + "&t=" + tok
			w, _ := strconv.Atoi(mustQuery(b, u).Get("width"))
			for b.Loop() {
				if bc.cold {
					s.pages.sums.mu.Lock()
					s.pages.sums.m = nil
					s.pages.sums.mu.Unlock()
				}
				resp, err := client.Get(u)
				if err != nil {
					b.Fatal(err)
				}
				var got pointsReply
				err = decodeJSON(resp, &got)
				if err != nil {
					b.Fatal(err)
				}
				if len(got.X) == 0 || len(got.X) > 2*w {
					b.Fatalf("%d points for %d px, want 1..%d", len(got.X), w, 2*w)
				}
			}
		})
	}
}

func mustQuery(b *testing.B, u string) url.Values {
	p, err := url.Parse(u)
	if err != nil {
		b.Fatal(err)
	}
	return p.Query()
}
