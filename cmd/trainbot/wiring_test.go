package main

import (
	"github.com/trainbot/trainbot/bot/command"
	"github.com/trainbot/trainbot/bot/deliver"
	"github.com/trainbot/trainbot/bot/notify"
	"github.com/trainbot/trainbot/bot/render"
	"github.com/trainbot/trainbot/gpu"
	"github.com/trainbot/trainbot/store"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/web"
)

// What main wires into the rooms' interfaces: the rooms declare what they
// need and import neither store nor trainer's Supervisor to say who has
// it; these assertions are here, where the two meet.
var (
	_ command.Trainer      = (*trainer.Supervisor)(nil)
	_ command.History      = (*store.Store)(nil)
	_ render.ChartData     = (*store.Store)(nil)
	_ render.FitData       = (*store.Store)(nil)
	_ deliver.Store        = (*store.Store)(nil)
	_ gpu.Recorder         = (*store.Store)(nil)
	_ web.History          = (*store.Store)(nil)
	_ notify.Subscriptions = (*store.Store)(nil)
	_ notify.History       = (*store.Store)(nil)
)
