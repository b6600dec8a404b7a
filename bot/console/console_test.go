package console

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/trainbot/trainbot/bot/chat"
)

// answer is what delivery does for the console, synchronously: h's answer
// to each message, sent back.
func answer(c *Console, h chat.HandlerFunc) func(context.Context, chat.Message) {
	return func(ctx context.Context, m chat.Message) {
		if r := h(ctx, m); !r.Empty() {
			c.Send(ctx, m.Chat, r, 0)
		}
	}
}

func TestConsoleEchoesRepliesImagesAndButtons(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	c := New(strings.NewReader("状态\n\n画图\n"), &out, dir)
	var got []chat.Message
	h := chat.HandlerFunc(func(ctx context.Context, m chat.Message) chat.Reply {
		got = append(got, m)
		if m.Text == "画图" {
			return chat.Reply{Images: []chat.Image{{Name: "run-1-loss.png", PNG: []byte("\x89PNG..."), Caption: "cap"}},
				Buttons: [][]chat.Button{{{Label: "停止 Stop", Data: "停止"}, {Label: "状态 Status", Data: "状态"}}}}
		}
		return chat.Reply{Text: "ok " + m.Text}
	})
	if err := c.Receive(context.Background(), answer(c, h)); err != nil {
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
	if err := c.Receive(ctx, func(context.Context, chat.Message) {}); err != context.Canceled {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

func TestConsoleAnswersALineTooLongAndGoesOn(t *testing.T) {
	long := strings.Repeat("x", MaxLine+1)
	limit := strings.Repeat("y", MaxLine)
	in := long + "\n状态\r\n" + limit + "\n" + strings.Repeat("z", 3*MaxLine) + "\n帮助"
	var out bytes.Buffer
	c := New(strings.NewReader(in), &out, t.TempDir())
	var got []string
	h := chat.HandlerFunc(func(ctx context.Context, m chat.Message) chat.Reply {
		got = append(got, m.Text)
		return chat.Reply{Text: fmt.Sprintf("ok %d", len(m.Text))}
	})
	if err := c.Receive(context.Background(), answer(c, h)); err != nil {
		t.Fatalf("got %v, want nil at the end of input", err)
	}
	want := fmt.Sprintf("message too long (%d bytes, limit %d)\nok %d\nok %d\nmessage too long (%d bytes, limit %d)\nok %d\n",
		MaxLine+1, MaxLine, len("状态"), MaxLine, 3*MaxLine, MaxLine, len("帮助"))
	if out.String() != want {
		t.Errorf("got output\n%.300s\nwant\n%s", out.String(), want)
	}
	if len(got) != 3 || got[0] != "状态" || got[1] != limit || got[2] != "帮助" {
		t.Errorf("handled %d messages, want 状态, the line of MaxLine bytes and 帮助", len(got))
	}
}

// failingWriter fails its first write.
type failingWriter struct {
	buf    bytes.Buffer
	failed bool
}

func (w *failingWriter) Write(p []byte) (int, error) {
	if !w.failed {
		w.failed = true
		return 0, errors.New("disk gone")
	}
	return w.buf.Write(p)
}

func TestConsoleReceiveAgainGoesOnWithTheNextLine(t *testing.T) {
	out := &failingWriter{}
	c := New(strings.NewReader(strings.Repeat("x", MaxLine+1)+"\n二\n三\n"), out, t.TempDir())
	h := answer(c, func(ctx context.Context, m chat.Message) chat.Reply { return chat.Reply{Text: "ok " + m.Text} })
	if err := c.Receive(context.Background(), h); err == nil {
		t.Fatal("got nil, want the write error of the too-long notice")
	}
	if err := c.Receive(context.Background(), h); err != nil {
		t.Fatalf("second receive: %v", err)
	}
	if got, want := out.buf.String(), "ok 二\nok 三\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestConsoleSendSkipsWhatWentOut(t *testing.T) {
	var out bytes.Buffer
	c := New(strings.NewReader(""), &out, t.TempDir())
	if n, err := c.Send(context.Background(), Chat, chat.Reply{Text: "once"}, 1); err != nil || n != 1 || out.Len() != 0 {
		t.Errorf("a reply sent before is not printed again: %d %v %q", n, err, out.String())
	}
}

// A reply shows what a run printed (日志) as text: its escape sequences
// reach the terminal escaped, its lines stay lines.
func TestConsoleEscapesControlsInReplies(t *testing.T) {
	var out bytes.Buffer
	c := New(strings.NewReader(""), &out, t.TempDir())
	log := "step 1 \x1b[32mloss=0.5\x1b[0m\nstep 2\rstep 3 \x1b]0;title\x07"
	if _, err := c.Send(context.Background(), Chat, chat.Reply{Text: log}, 0); err != nil {
		t.Fatal(err)
	}
	want := `step 1 \x1b[32mloss=0.5\x1b[0m` + "\n" + `step 2\rstep 3 \x1b]0;title\x07` + "\n"
	if got := out.String(); got != want {
		t.Errorf("printed %q, want %q", got, want)
	}
}
