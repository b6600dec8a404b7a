// Package console is the terminal transport: each line of standard input is
// a message from the local user, who is an operator (chat.Receiver); replies
// are printed to standard output (chat.Sender). Charts are written under
// DATA/charts/ and shown as a line "[image] PATH"; buttons are shown as
// "[buttons] 停止 | 状态 | 画图", the words to type. A line longer than
// MaxLine is answered "message too long" at once, like a line editor would,
// and the chat goes on.
package console

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/trainbot/trainbot/bot/chat"
	"github.com/trainbot/trainbot/internal/termsafe"
)

// Name is the transport's name.
const Name = "console"

// Chat is the console's one chat id.
const Chat int64 = 0

// MaxLine is the longest line taken as a message, in bytes, without its
// newline.
const MaxLine = 1 << 20

// Console reads messages from In and writes replies to Out.
type Console struct {
	In        io.Reader
	Out       io.Writer
	ChartsDir string // where images are written
	User      chat.User

	mu sync.Mutex // serialises writes to Out

	readMu  sync.Mutex
	lines   chan line  // from the reader of In; nil when none reads
	readErr chan error // the reader's end: nil at the end of input
}

// line is one line of input; size is its length without the newline. A
// line longer than MaxLine has no text.
type line struct {
	text string
	size int
}

var (
	_ chat.Receiver = (*Console)(nil)
	_ chat.Sender   = (*Console)(nil)
)

// New returns a console on the given streams; the user is the login name.
func New(in io.Reader, out io.Writer, chartsDir string) *Console {
	name := "local"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	return &Console{In: in, Out: out, ChartsDir: chartsDir, User: chat.User{ID: int64(os.Getuid()), Name: name}}
}

// Name returns "console".
func (c *Console) Name() string { return Name }

// Receive delivers each input line until the input ends (nil) or ctx
// ends. A Receive that returned early (a line could not be written) may be
// called again: it goes on with the next line.
func (c *Console) Receive(ctx context.Context, deliver func(context.Context, chat.Message)) error {
	lines, readErr := c.reader()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-readErr:
			if err != nil {
				return fmt.Errorf("read input: %w", err)
			}
			return nil
		case l := <-lines:
			switch {
			case l.size > MaxLine:
				if err := c.write(fmt.Sprintf("message too long (%d bytes, limit %d)\n", l.size, MaxLine)); err != nil {
					return err
				}
			case strings.TrimSpace(l.text) != "":
				deliver(ctx, chat.Message{Transport: Name, Chat: Chat, User: c.User, Text: l.text, Local: true})
			}
		}
	}
}

// reader returns the lines of In and the end of input. One goroutine reads
// In, from the first Receive until the input ends or fails, and hands each
// line to whichever Receive is waiting, so one that is called again loses
// no line.
// It cannot be stopped: a read of a terminal cannot be cancelled anyway.
func (c *Console) reader() (<-chan line, <-chan error) {
	c.readMu.Lock()
	defer c.readMu.Unlock()
	if c.lines == nil {
		lines, readErr := make(chan line), make(chan error, 1)
		c.lines, c.readErr = lines, readErr
		go func() {
			err := readLines(c.In, MaxLine, func(l line) { lines <- l })
			c.readMu.Lock()
			c.lines, c.readErr = nil, nil // the next Receive reads again
			c.readMu.Unlock()
			readErr <- err
		}()
	}
	return c.lines, c.readErr
}

// readLines calls emit for each line of in, without its newline (and a
// carriage return before it), until the input ends (nil) or fails. A line
// longer than limit is not kept: emit gets its size and no text, and the
// next line is read as usual.
func readLines(in io.Reader, limit int, emit func(line)) error {
	br := bufio.NewReaderSize(in, 64<<10)
	var buf []byte
	size := 0 // bytes of the line so far, newline included
	end := func(newline bool) {
		n := size
		if newline {
			n--
		}
		if n > limit {
			emit(line{size: n})
		} else {
			text := strings.TrimSuffix(strings.TrimSuffix(string(buf), "\n"), "\r")
			emit(line{text: text, size: len(text)})
		}
		buf, size = buf[:0], 0
	}
	for {
		frag, err := br.ReadSlice('\n')
		size += len(frag)
		if size <= limit+1 { // the newline does not count
			buf = append(buf, frag...)
		}
		switch {
		case err == nil:
			end(true)
		case errors.Is(err, bufio.ErrBufferFull):
			// The line goes on.
		case errors.Is(err, io.EOF):
			if size > 0 {
				end(false)
			}
			return nil
		default:
			return err
		}
	}
}

// Send prints a reply (one attempt: a terminal has one message per reply).
func (c *Console) Send(_ context.Context, _ int64, r chat.Reply, skip int) (int, error) {
	if skip > 0 {
		return skip, nil
	}
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
				if btn.URL != "" {
					words = append(words, btn.Label+" "+btn.URL)
					continue
				}
				words = append(words, btn.Data)
			}
		}
		fmt.Fprintf(&b, "[buttons] %s\n", strings.Join(words, " | "))
	}
	// The text holds what others wrote (a run's output, notes, names):
	// shown, never acted on by the terminal.
	if err := c.write(termsafe.String(b.String())); err != nil {
		return 0, err
	}
	return 1, nil
}

func (c *Console) write(s string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := io.WriteString(c.Out, s)
	return err
}

func (c *Console) writeImage(img chat.Image) (string, error) {
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
