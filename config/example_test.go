package config_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/trainbot/trainbot/bot/messengers"
	"github.com/trainbot/trainbot/bot/telegram"
	"github.com/trainbot/trainbot/bot/transport"
	"github.com/trainbot/trainbot/config"
)

// The example file parses and validates with the transports trainbot is
// built with, and its sections say what the README says of them.
func TestExampleConfig(t *testing.T) {
	c, err := config.Load(filepath.Join("..", "config.example.toml"), func(c *config.Config) { transport.Declare(c, messengers.All()) })
	if err != nil {
		t.Fatalf("config.example.toml: %v", err)
	}
	if len(c.Jobs) == 0 {
		t.Fatal("the example has no job")
	}
	j := c.Jobs[0]
	if d, _ := j.Params["batch_size"].DefaultText(); j.Name != "mnist" || time.Duration(j.StopGrace) != 30*time.Second || d != "64" || j.Params["lr"].Env != "LEARNING_RATE" {
		t.Errorf("unexpected job %+v", j)
	}
	if g := c.GPU; time.Duration(g.Interval) != 2*time.Second || g.MemoryAlert != 95 || g.TempAlert != 85 {
		t.Errorf("example [gpu] = %+v", g)
	}
	if h := c.HTTP; h.Listen != "" || h.LinkTTL != config.DefaultLinkTTL || h.PublicURL != "" || h.MaxConnections != config.DefaultMaxConnections {
		t.Errorf("example [http] = %+v: want off, with the defaults", h)
	}
	if c.Plots.Smoothing != 0.6 || c.Plots.Font != "" {
		t.Errorf("example [plots] = %+v", c.Plots)
	}
	tg, _ := c.Section("telegram").(*telegram.Section)
	if tg == nil || tg.Token != "" || tg.APIEndpoint != "https://api.telegram.org" || time.Duration(tg.PollTimeout) != 30*time.Second || c.ProgressInterval() != 10*time.Second {
		t.Errorf("example [telegram] = %+v, progress %v", tg, c.ProgressInterval())
	}
	if len(c.Auth.Operators) != 1 || c.Auth.Operators[0] != 123456789 || len(c.Auth.Viewers) != 0 {
		t.Errorf("auth: %+v", c.Auth)
	}
	for _, name := range []string{"wecom", "feishu", "dingtalk"} {
		if s := transport.SectionOf(c, name); s == nil || s.On() {
			t.Errorf("example [%s]: %+v, want declared and off", name, s)
		}
	}
}
