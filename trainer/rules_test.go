package trainer

import (
	"strings"
	"testing"
	"time"
)

func TestRuleStates(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	type obs struct {
		sec  int
		step int64
		v    float64
		fire bool
	}
	for _, c := range []struct {
		name string
		rule AlertRule
		obs  []obs
	}{
		{"above at once, once until it clears", AlertRule{Metric: "loss", When: RuleAbove, Value: 1}, []obs{
			{0, 1, 0.5, false}, {1, 2, 1.5, true}, {2, 3, 2, false}, {3, 4, 0.9, false}, {4, 5, 1.1, true}}},
		{"below for 3 steps", AlertRule{Metric: "acc", When: RuleBelow, Value: 0.5, ForSteps: 3}, []obs{
			{0, 1, 0.4, false}, {1, 2, 0.4, false}, {2, 3, 0.4, false}, {3, 4, 0.4, true}, {4, 5, 0.3, false}}},
		{"no improvement of a loss for 20 steps", AlertRule{Metric: "loss", When: RuleNoImprovement, ForSteps: 20}, []obs{
			{0, 10, 1, false}, {1, 20, 0.5, false}, {2, 30, 0.6, false}, {3, 39, 0.55, false}, {4, 40, 0.51, true}, {5, 50, 0.52, false},
			{6, 60, 0.4, false}, {7, 80, 0.45, true}}},
		{"no improvement of an accuracy, by more than 0.01", AlertRule{Metric: "val_acc", When: RuleNoImprovement, Value: 0.01, ForSteps: 2}, []obs{
			{0, 1, 0.5, false}, {1, 2, 0.505, false}, {2, 3, 0.508, true}}},
		{"rate below 10/s over 5 s", AlertRule{Metric: "tokens", When: RuleRateBelow, Value: 10, ForTime: 5 * time.Second}, []obs{
			{0, 1, 0, false}, {3, 2, 100, false}, {6, 3, 140, false}, {9, 4, 170, false}, {12, 5, 175, true}, {15, 6, 180, false}, {21, 7, 500, false}, {27, 8, 510, true}}},
	} {
		s := &ruleState{rule: c.rule}
		for _, o := range c.obs {
			got := s.observe(at(o.sec), o.step, o.v)
			if (got != "") != o.fire {
				t.Errorf("%s: at %ds step %d value %g: fired %q, want fire=%v", c.name, o.sec, o.step, o.v, got, o.fire)
			}
		}
	}
}

// A condition that holds for a time fires on the clock, without a new value.
func TestRuleFiresOnTime(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	s := &ruleState{rule: AlertRule{Metric: "loss", When: RuleNoImprovement, ForTime: time.Minute, Message: "loss plateaued"}}
	s.observe(t0, 1, 0.5)
	if got := s.check(t0.Add(59*time.Second), 1); got != "" {
		t.Errorf("fired early: %q", got)
	}
	got := s.check(t0.Add(61*time.Second), 1)
	if !strings.HasPrefix(got, "loss plateaued (rule: loss no_improvement for 1m): loss is 0.5000; its best was 0.5000 at step 1, 1m") {
		t.Errorf("got %q", got)
	}
	if again := s.check(t0.Add(2*time.Minute), 1); again != "" {
		t.Errorf("fired twice: %q", again)
	}
}

func TestRuleValidateAndFor(t *testing.T) {
	for _, c := range []struct {
		rule AlertRule
		want string
	}{
		{AlertRule{When: RuleAbove}, "metric:"},
		{AlertRule{Metric: "x", When: "sideways"}, `when: "sideways"`},
		{AlertRule{Metric: "x", When: RuleNoImprovement}, "for: no_improvement needs"},
		{AlertRule{Metric: "x", When: RuleRateBelow, ForSteps: 5}, "for: rate_below needs a time window"},
	} {
		if err := c.rule.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.rule, err, c.want)
		}
	}
	parse := func(s string) (time.Duration, error) { return time.ParseDuration(s) }
	if n, d, err := ParseFor("20 steps", parse); n != 20 || d != 0 || err != nil {
		t.Errorf("20 steps: %d %v %v", n, d, err)
	}
	if n, d, err := ParseFor("10m", parse); n != 0 || d != 10*time.Minute || err != nil {
		t.Errorf("10m: %d %v %v", n, d, err)
	}
	if _, _, err := ParseFor("often", parse); err == nil {
		t.Error("often: no error")
	}
}
