package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/bot/command"
	"github.com/trainbot/trainbot/bot/deliver"
	"github.com/trainbot/trainbot/bot/notify"
	"github.com/trainbot/trainbot/bot/push"
	"github.com/trainbot/trainbot/bot/render"
	"github.com/trainbot/trainbot/config"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/schedule"
	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
)

// printAlerts lists the push channels and the schedules with their next
// run, for `trainbot check`.
func printAlerts(e env, bc *botConfig) {
	for _, c := range bc.channels {
		kinds := "all alerts"
		if c.alerts != nil {
			kinds = "alerts " + strings.Join(c.alerts, ", ")
		}
		if c.progress {
			kinds += " and progress"
		}
		quiet := ""
		if !c.quiet.IsZero() {
			quiet = fmt.Sprintf("; quiet %s (%s and above still go)", c.quiet, c.quiet.MinSeverity)
		}
		fmt.Fprintf(e.stdout, "push %s:%s: %s%s\n", c.opts.Kind, c.opts.Name, kinds, quiet)
	}
	now := time.Now()
	for _, s := range bc.schedules {
		sch, err := schedule.Parse(s.Spec)
		if err != nil {
			continue
		}
		what := s.Action
		if s.Action == config.ActionStart {
			what += " " + s.Job
		}
		fmt.Fprintf(e.stdout, "schedule %s: %s at %q, next %s\n", s.Name, what, s.Spec, sch.Next(now).Format("2006-01-02 15:04 MST"))
	}
}

// pushed is what the push channels of the config become: their senders,
// what each wants (notify), and the quiet hours of every destination
// (deliver: the [[quiet]] chats' and the channels').
type pushedChannels struct {
	senders  []chat.Sender
	channels []notify.Channel
	quiet    map[chat.ChatKey]deliver.QuietHours
}

// pushChannels makes the push channels, and the quiet hours of every
// destination.
func pushChannels(bc *botConfig, logger *slog.Logger) (pushedChannels, error) {
	out := pushedChannels{quiet: map[chat.ChatKey]deliver.QuietHours{}}
	for k, q := range bc.quiet {
		out.quiet[k] = q
	}
	for _, c := range bc.channels {
		o := c.opts
		o.Logger = logger.With("component", "push")
		ch, err := push.New(o)
		if err != nil {
			return pushedChannels{}, err
		}
		out.senders = append(out.senders, ch)
		out.channels = append(out.channels, notify.Channel{Name: ch.Name(), Alerts: c.alerts, Progress: c.progress})
		if !c.quiet.IsZero() {
			out.quiet[chat.ChatKey{Transport: ch.Name()}] = c.quiet
		}
		logger.Info("push channel", "channel", ch.Name(), "alerts", c.alerts, "progress", c.progress, "quiet_hours", c.quiet.String())
	}
	return out, nil
}

// chartsHook draws the charts of reports and end-of-run messages; a chart
// that fails is logged and left out.
func chartsHook(charts *render.Charts, logger *slog.Logger) func(context.Context, i18n.Lang, *trainer.Run) []chat.Image {
	return func(ctx context.Context, l i18n.Lang, run *trainer.Run) []chat.Image {
		in := *charts
		in.Lang = l
		imgs, err := in.RunCharts(ctx, run)
		if err != nil {
			logger.Warn("draw charts", "run", run.ID, "err", err)
		}
		return imgs
	}
}

// startSchedules runs the [[schedules]]: reports pushed as progress, starts
// through the supervisor (a refusal is pushed as an alert).
func startSchedules(entries []scheduleEntry, sup *trainer.Supervisor, st *store.Store, n *notify.Notifier,
	charts func(context.Context, i18n.Lang, *trainer.Run) []chat.Image, logger *slog.Logger) (*schedule.Scheduler, error) {
	log := logger.With("component", "schedule")
	s := schedule.New(schedule.Options{Logger: log})
	for _, e := range entries {
		var job func(ctx context.Context)
		switch e.Action {
		case config.ActionReport:
			job = func(ctx context.Context) {
				n.PushIn(notify.ReportReply(ctx, sup, st, charts, e.Name, time.Now()))
			}
		case config.ActionStart:
			job = func(ctx context.Context) {
				if words, refused := command.ScheduledStart(ctx, sup, e.Name, e.Job, e.Params, time.Now()); refused {
					log.Warn("scheduled start refused", "schedule", e.Name, "reason", words(i18n.En).Text)
					n.PushIn(words)
				}
			}
		}
		if err := s.Add(e.Name, e.Spec, job); err != nil {
			return nil, err
		}
	}
	s.Start()
	for _, e := range s.Entries() {
		log.Info("scheduled", "schedule", e.Name, "next", e.Next.Format(time.RFC3339))
	}
	return s, nil
}
