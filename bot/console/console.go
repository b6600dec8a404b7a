// Package console is the terminal transport: each line of standard input is
// a message from the local user, who is an operator; replies are printed to
// standard output. Charts are written under DATA/charts/ and shown as a line
// "[image] PATH"; buttons are shown as "[buttons] 停止 | 状态 | 画图", the
// words to type.
package console

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/trainbot/trainbot/bot"
)

// Name is the transport's name.
const Name = "console"

// Chat is the console's one chat id.
const Chat int64 = 0

// Console reads messages from In and writes replies to Out.
type Console struct {
	In        io.Reader
	Out       io.Writer
	ChartsDir string // where images are written
	User      bot.User

	mu sync.Mutex // serialises writes to Out
}

var _ bot.Transport = (*Console)(nil)

// New returns a console on the given streams; the user is the login name.
func New(in io.Reader, out io.Writer, chartsDir string) *Console {
	name := "local"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	return &Console{In: in, Out: out, ChartsDir: chartsDir, User: bot.User{ID: int64(os.Getuid()), Name: name}}
}

// Name returns "console".
func (c *Console) Name() string { return Name }

// Run answers each input line until the input ends (nil) or ctx ends.
func (c *Console) Run(ctx context.Context, h bot.Handler) error {
	lines := make(chan string)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(c.In)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
		readErr <- sc.Err()
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-readErr:
			if err != nil {
				return fmt.Errorf("read input: %w", err)
			}
			return nil
		case line := <-lines:
			if strings.TrimSpace(line) == "" {
				continue
			}
			m := bot.Message{Transport: Name, Chat: Chat, User: c.User, Text: line, Local: true}
			r := h.Handle(ctx, m)
			if r.Empty() {
				continue
			}
			if err := c.Send(ctx, Chat, r); err != nil {
				return err
			}
		}
	}
}

// Send prints a reply.
func (c *Console) Send(ctx context.Context, chat int64, r bot.Reply) error {
	var b strings.Builder
	if r.Text != "" {
		b.WriteString(r.Text)
		b.WriteString("\n")
	}
	for _, img := range r.Images {
		path, err := c.writeImage(img)
		if err != nil {
			fmt.Fprintf(&b, "[image not saved: %v]\n", err)
			continue
		}
		fmt.Fprintf(&b, "[image] %s\n", path)
		if img.Caption != "" {
			fmt.Fprintf(&b, "        %s\n", img.Caption)
		}
	}
	if len(r.Buttons) > 0 {
		var words []string
		for _, row := range r.Buttons {
			for _, btn := range row {
				words = append(words, btn.Data)
			}
		}
		fmt.Fprintf(&b, "[buttons] %s\n", strings.Join(words, " | "))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := io.WriteString(c.Out, b.String())
	return err
}

func (c *Console) writeImage(img bot.Image) (string, error) {
	if err := os.MkdirAll(c.ChartsDir, 0o755); err != nil {
		return "", err
	}
	name := filepath.Base(img.Name)
	if name == "" || name == "." || name == "/" {
		name = "chart.png"
	}
	ext := filepath.Ext(name)
	name = fmt.Sprintf("%s-%s%s", strings.TrimSuffix(name, ext), time.Now().Format("20060102-150405.000"), ext)
	path := filepath.Join(c.ChartsDir, name)
	if err := os.WriteFile(path, img.PNG, 0o644); err != nil {
		return "", err
	}
	return path, nil
}
