package console

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/trainbot/trainbot/bot"
)

func TestConsoleEchoesRepliesImagesAndButtons(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	c := New(strings.NewReader("状态\n\n画图\n"), &out, dir)
	var got []bot.Message
	h := bot.HandlerFunc(func(ctx context.Context, m bot.Message) bot.Reply {
		got = append(got, m)
		if m.Text == "画图" {
			return bot.Reply{Images: []bot.Image{{Name: "run-1-loss.png", PNG: []byte("\x89PNG..."), Caption: "cap"}},
				Buttons: [][]bot.Button{{{Label: "停止 Stop", Data: "停止"}, {Label: "状态 Status", Data: "状态"}}}}
		}
		return bot.Reply{Text: "ok " + m.Text}
	})
	if err := c.Run(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got[0].Local || got[0].Transport != "console" {
		t.Fatalf("messages %+v: blank lines are skipped, the user is local", got)
	}
	s := out.String()
	if !strings.Contains(s, "ok 状态\n") || !strings.Contains(s, "[buttons] 停止 | 状态\n") {
		t.Fatalf("output:\n%s", s)
	}
	i := strings.Index(s, "[image] ")
	if i < 0 {
		t.Fatalf("no image line:\n%s", s)
	}
	path := strings.TrimSpace(strings.SplitN(s[i+len("[image] "):], "\n", 2)[0])
	if !strings.HasPrefix(path, dir) || !strings.HasSuffix(path, ".png") {
		t.Fatalf("image path %q not under %s", path, dir)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "\x89PNG..." {
		t.Fatalf("image file: %v", err)
	}
}

func TestConsoleStopsWithContext(t *testing.T) {
	r, w, _ := os.Pipe()
	defer w.Close()
	defer r.Close()
	c := New(r, &bytes.Buffer{}, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Run(ctx, bot.HandlerFunc(func(context.Context, bot.Message) bot.Reply { return bot.Reply{} })); err != context.Canceled {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}
