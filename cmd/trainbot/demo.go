package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/trainbot/trainbot/bot/console"
	"github.com/trainbot/trainbot/i18n"
	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/demo"
)

func cmdDemo(ctx context.Context, args []string, e env) int {
	fs := newFlags("demo", "[--data DIR] [--steps N]", e)
	cf := configFlags{explicit: true}
	cf.register(fs, false)
	fs.Lookup("config").Usage = "config file (TOML) whose jobs and transports join the demo's; only this flag names one (the demo reads no config by itself)"
	def := demo.DefaultConfig()
	steps := fs.Int("steps", def.Steps, "training steps of the demo job (1500 ≈ 30 s)")
	pace := fs.Duration("pace", def.Pace, "minimum time per training step")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return usageError(fs, e, "unexpected argument %q", pos[0])
	}
	if *steps < 1 || *steps > 10_000_000 {
		return usageError(fs, e, "--steps %d: want 1..10000000", *steps)
	}
	if *pace < 0 || *pace > time.Minute {
		return usageError(fs, e, "--pace %s: want 0..1m", *pace)
	}
	cfg, bc, code := cf.load(e)
	if cfg == nil {
		return code
	}
	o := botOptions{cfg: cfg, bc: bc, console: true, exitAtEOF: true, cli: cliFlags(cf, cfg.DataDir, e.environ)}
	job := DemoJob(e.exe, *steps, *pace)
	if bc.langs.For(console.Name) == i18n.Zh {
		localizeDemo(job)
	}
	return startBot(ctx, e, o, []*trainer.Job{job})
}

// demoWordsZH are the demo job's own words in Chinese, for a terminal that
// speaks zh (任务 showed its English description and help).
var demoWordsZH = map[string]string{
	"":           "内置演示：用 Go 写的两层 MLP，学习三臂螺旋的分类",
	"steps":      "训练步数",
	"lr":         "Adam 学习率",
	"hidden":     "隐藏层单元数",
	"batch_size": "每步的样本数",
	"seed":       "数据和初始化的随机种子",
	"pace_ms":    "每步最少的毫秒数",
}

// localizeDemo words the demo job's description and parameter help in
// Chinese.
func localizeDemo(j *trainer.Job) {
	j.Description = demoWordsZH[""]
	for name, p := range j.Params {
		if h, ok := demoWordsZH[name]; ok {
			p.Help = h
			j.Params[name] = p
		}
	}
}

func f64(v float64) *float64 { return &v }

// DemoJob is the built-in demo: trainbot itself, running demo-train.
func DemoJob(exe string, steps int, pace time.Duration) *trainer.Job {
	def := demo.DefaultConfig()
	return &trainer.Job{
		Name:        "demo",
		Description: "built-in demo: a two-layer MLP learning a 3-arm spiral in Go",
		Command: []string{exe, "demo-train", "--steps", "{steps}", "--lr", "{lr}", "--hidden", "{hidden}",
			"--batch-size", "{batch_size}", "--seed", "{seed}", "--pace-ms", "{pace_ms}"},
		Params: map[string]trainer.ParamSpec{
			"steps":      {Type: trainer.ParamInt, Default: strconv.Itoa(steps), HasDefault: true, Min: f64(1), Max: f64(10_000_000), Help: "training steps"},
			"lr":         {Type: trainer.ParamFloat, Default: strconv.FormatFloat(def.LR, 'g', -1, 64), HasDefault: true, Min: f64(1e-6), Max: f64(10), Help: "Adam learning rate"},
			"hidden":     {Type: trainer.ParamInt, Default: strconv.Itoa(def.Hidden), HasDefault: true, Min: f64(1), Max: f64(4096), Help: "hidden units"},
			"batch_size": {Type: trainer.ParamInt, Default: strconv.Itoa(def.BatchSize), HasDefault: true, Min: f64(1), Max: f64(4096), Help: "examples per step"},
			"seed":       {Type: trainer.ParamInt, Default: "1", HasDefault: true, Min: f64(0), Help: "data and initialisation seed"},
			"pace_ms":    {Type: trainer.ParamInt, Default: strconv.FormatInt(pace.Milliseconds(), 10), HasDefault: true, Min: f64(0), Max: f64(60000), Help: "minimum milliseconds per step"},
		},
		StopGrace:  5 * time.Second,
		KillGrace:  5 * time.Second,
		StallAfter: time.Minute,
	}
}

// cmdDemoTrain is the demo training process itself.
func cmdDemoTrain(ctx context.Context, args []string, e env) int {
	fs := newFlags("demo-train", "[flags]", e)
	def := demo.DefaultConfig()
	c := def
	fs.IntVar(&c.Steps, "steps", def.Steps, "training steps")
	fs.Float64Var(&c.LR, "lr", def.LR, "Adam learning rate")
	fs.IntVar(&c.Hidden, "hidden", def.Hidden, "hidden units")
	fs.IntVar(&c.BatchSize, "batch-size", def.BatchSize, "examples per step")
	seed := fs.Uint64("seed", def.Seed, "seed")
	paceMS := fs.Int("pace-ms", int(def.Pace.Milliseconds()), "minimum milliseconds per step")
	fs.StringVar(&c.Checkpoint, "checkpoint", "", "write the weights here at the end (default $TRAINBOT_RUN_DIR/checkpoint.json)")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return usageError(fs, e, "unexpected argument %q", pos[0])
	}
	c.Seed = *seed
	c.Pace = time.Duration(*paceMS) * time.Millisecond
	if c.Checkpoint == "" {
		for _, kv := range e.environ {
			if v, ok := strings.CutPrefix(kv, "TRAINBOT_RUN_DIR="); ok && v != "" {
				c.Checkpoint = filepath.Join(v, "checkpoint.json")
			}
		}
	}
	// SIGINT (trainbot's stop) ends training at the next step, and the
	// checkpoint is still written: what a careful PyTorch script does.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := demo.Train(ctx, c, e.stdout)
	if err != nil {
		return errorf(e, "%v", err)
	}
	if res.Interrupted {
		fmt.Fprintln(e.stderr, "demo-train: interrupted")
		return 130
	}
	return exitOK
}
