// Command servemem measures what `trainbot serve` holds while it answers
// the chat over a long history: it starts a fake Telegram Bot API, runs
// the given trainbot binary's serve on a data directory (histgen's), sends
// 历史, 画图 (the latest run), 画图 of the first run and 对比 of three runs,
// waits for each answer, and prints the process's peak resident memory
// (VmHWM) and the wall time of each answer.
//
//	servemem -trainbot ./trainbot -data DIR -runs 100
//
// Run it through bench/servemem.sh.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/trainbot/trainbot/bot/telegram/telegramtest"
)

const token = "123456789:AAE-ServeMem_benchToken0123456789"

func main() {
	bin := flag.String("trainbot", "", "trainbot binary")
	data := flag.String("data", "", "data directory (histgen's)")
	runs := flag.Int("runs", 100, "runs in the history")
	flag.Parse()
	if *bin == "" || *data == "" || *runs < 3 {
		fmt.Fprintln(os.Stderr, "usage: servemem -trainbot BIN -data DIR [-runs N]")
		os.Exit(2)
	}
	if err := measure(*bin, *data, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "servemem:", err)
		os.Exit(1)
	}
}

func measure(bin, data string, runs int) error {
	fake := telegramtest.NewServer(token)
	defer fake.Close()
	dir, err := os.MkdirTemp("", "servemem")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// A copy of the history: serve writes to it (the chat's update offset,
	// pruning), and each measurement starts from the same one.
	work := filepath.Join(dir, "data")
	if err := copyDB(data, work); err != nil {
		return err
	}
	cfg := filepath.Join(dir, "trainbot.toml")
	text := fmt.Sprintf("data_dir = %q\n[telegram]\napi_endpoint = %q\npoll_timeout = \"1s\"\n[auth]\noperators = [111]\n", work, fake.URL)
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--config", cfg)
	cmd.Env = append(os.Environ(), "TRAINBOT_TELEGRAM_TOKEN="+token)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}()
	if !fake.Await(time.Minute, func() bool { return len(fake.Commands()) > 0 }) {
		return fmt.Errorf("serve did not start; stderr:\n%s", stderr.String())
	}
	fmt.Printf("started: VmRSS %s, VmHWM %s\n", status(cmd.Process.Pid, "VmRSS"), status(cmd.Process.Pid, "VmHWM"))
	asks := []struct{ text, photoOr string }{
		{"历史", ""},
		{"画图", "photo"},
		{"画图 1", "photo"},
		{fmt.Sprintf("对比 %d %d %d", runs, runs-1, runs-2), "photo"},
	}
	for _, a := range asks {
		before := len(fake.Messages(111))
		t := time.Now()
		fake.UserSays(111, a.text)
		ok := fake.Await(2*time.Minute, func() bool {
			ms := fake.Messages(111)
			if len(ms) <= before {
				return false
			}
			if a.photoOr == "" {
				return true
			}
			for _, m := range ms[before:] {
				if len(m.Photo) > 0 {
					return true
				}
			}
			return false
		})
		if !ok {
			return fmt.Errorf("no answer to %s; stderr:\n%s", a.text, stderr.String())
		}
		// Let the rest of a several-message answer arrive.
		time.Sleep(300 * time.Millisecond)
		fmt.Printf("%-16s answered in %5d ms, VmRSS %s, VmHWM %s\n", a.text, time.Since(t).Milliseconds(),
			status(cmd.Process.Pid, "VmRSS"), status(cmd.Process.Pid, "VmHWM"))
	}
	hwm := status(cmd.Process.Pid, "VmHWM")
	kb, _ := strconv.Atoi(strings.Fields(hwm + " 0")[0])
	fmt.Printf("peak RSS %.1f MB\n", float64(kb)/1024)
	return nil
}

// copyDB copies the database of a data directory into a new one.
func copyDB(from, to string) error {
	if err := os.MkdirAll(to, 0o700); err != nil {
		return err
	}
	src, err := os.Open(filepath.Join(from, "trainbot.db"))
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(filepath.Join(to, "trainbot.db"))
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// status returns a field of /proc/PID/status ("123456 kB").
func status(pid int, field string) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}
