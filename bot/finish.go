package bot

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/trainbot/trainbot/internal/units"
	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
)

// completeEndReport adds what needs the history to the report of an ended
// run: the best value of each loss- or accuracy-like metric, and the
// charts, as images of the same reply (one message with photos).
func (n *Notifier) completeEndReport(ctx context.Context, e trainer.Event, r *Reply) {
	best := ""
	if n.opts.Extremes != nil {
		ext, err := n.opts.Extremes(ctx, e.Run.ID)
		if err != nil {
			n.log.Warn("read best metrics", "run", e.Run.ID, "err", err)
		}
		best = BestText(ext, 4)
	}
	r.Text = endReport(e, best)
	if n.opts.Charts != nil {
		r.Images = append(r.Images, n.opts.Charts(ctx, e.Run)...)
	}
}

// MetricGoal says whether lower (-1) or higher (+1) values of a metric are
// better, or neither (0): losses and errors go down, accuracies go up.
func MetricGoal(name string) int {
	if trainer.IsLossName(name) {
		return -1
	}
	words := strings.FieldsFunc(strings.ToLower(name), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	})
	for _, w := range words {
		switch w {
		case "ppl", "perplexity", "error", "err", "wer", "cer", "mae", "mse", "rmse", "fid", "nll":
			return -1
		case "f1", "auc", "auroc", "precision", "recall", "map", "bleu", "iou", "miou", "dice", "top1", "top5", "reward", "score":
			return 1
		}
		if strings.HasPrefix(w, "acc") || strings.HasPrefix(w, "rouge") || strings.HasPrefix(w, "map5") {
			return 1
		}
	}
	return 0
}

// BestText is "best val_loss 0.0498 (step 1200) · val_acc 0.9912 (step
// 1300)": the best value of up to n metrics with a goal, losses first.
func BestText(ext map[string]store.Extremes, n int) string {
	var names []string
	for name := range ext {
		if MetricGoal(name) != 0 {
			names = append(names, name)
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		if ga, gb := MetricGoal(a), MetricGoal(b); ga != gb {
			return ga - gb // losses (-1) first
		}
		return strings.Compare(a, b)
	})
	if len(names) > n {
		names = names[:n]
	}
	parts := make([]string, len(names))
	for i, name := range names {
		x := ext[name]
		v, step := x.Min, x.MinStep
		if MetricGoal(name) > 0 {
			v, step = x.Max, x.MaxStep
		}
		parts[i] = fmt.Sprintf("%s %s (step %d)", name, units.Value(v), step)
	}
	if len(parts) == 0 {
		return ""
	}
	return "best " + strings.Join(parts, " · ")
}
