package trainer_test

import (
	"bufio"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainbot/trainbot/trainer"
	"github.com/trainbot/trainbot/trainer/shim"
	"github.com/trainbot/trainbot/trainer/shimctl"
)

// The test binary doubles as the supervised child: with TRAINBOT_TEST_CHILD
// set it behaves as one of the programs below instead of running tests.
const childEnv = "TRAINBOT_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode, os.Args[1:]))
	}
	// The test binary is also each run's supervisor (Options.ShimCommand
	// defaults to this executable with "shim").
	shim.MainIfAsked()
	os.Exit(m.Run())
}

// childCommand is the argv that runs the test binary as a child in mode.
func childCommand(mode string, args ...string) []string {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	return append([]string{"/usr/bin/env", childEnv + "=" + mode, exe}, args...)
}

func child(mode string, args []string) int {
	arg := func(i int, def string) string {
		if i < len(args) {
			return args[i]
		}
		return def
	}
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	w := bufio.NewWriterSize(os.Stdout, 64<<10)
	defer w.Flush()
	switch mode {
	case "print": // print N classic lines, D ms apart, then exit with status X
		n, d, code := atoi(arg(0, "10")), atoi(arg(1, "0")), atoi(arg(2, "0"))
		for i := 1; i <= n; i++ {
			fmt.Fprintf(w, "Epoch [1/1], Step [%d/%d], Loss: %.4f\n", i, n, 1/float64(i))
			if d > 0 {
				w.Flush()
				time.Sleep(time.Duration(d) * time.Millisecond)
			}
		}
		w.Flush()
		fmt.Fprintln(os.Stderr, "done printing")
		return code
	case "cpuprint": // CPU-bound work that prints N lines, W rounds of work per line (overhead benchmark); own runtime (ns) to file arg 3
		n, work := atoi(arg(0, "1000000")), atoi(arg(1, "200"))
		start := time.Now()
		if f := arg(3, ""); f != "" {
			defer func() { os.WriteFile(f, []byte(strconv.FormatInt(int64(time.Since(start)), 10)), 0o644) }()
		}
		defer w.Flush() // before the runtime is taken
		x := uint64(1)
		for i := 1; i <= n; i++ {
			for k := 0; k < work; k++ {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
			}
			fmt.Fprintf(w, "step %d loss=%.4f\n", i, float64(x%10000)/10000)
		}
		if arg(2, "") == "hold" { // then wait to be stopped
			w.Flush()
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
			<-sig
		}
		return 0
	case "stepless": // print N lines "loss=X" (no step: the parser counts one per line) as fast as it can
		n := atoi(arg(0, "1000000"))
		for i := range int64(n) {
			fmt.Fprintf(w, "loss=%.4f\n", trainer.NoisyLoss(i))
		}
		return 0
	case "curve": // print N lines "step=I loss=X" of trainer.NoisyLoss, I from 0, as fast as it can
		n := atoi(arg(0, "1000000"))
		for i := range int64(n) {
			fmt.Fprintf(w, "step=%d loss=%.4f\n", i, trainer.NoisyLoss(i))
		}
		return 0
	case "env":
		for _, k := range strings.Split(arg(0, ""), ",") {
			fmt.Fprintf(w, "%s=%s\n", k, os.Getenv(k))
		}
		fmt.Fprintf(w, "args=%q\n", args[1:])
		return 0
	case "flood": // write N MiB as fast as possible; write own runtime (ns) to file
		n := atoi(arg(0, "200"))
		line := []byte(strings.Repeat("x", 99) + "\n")
		block := make([]byte, 0, 1<<20)
		for len(block)+len(line) <= 1<<20 {
			block = append(block, line...)
		}
		start := time.Now()
		for i := 0; i < n; i++ {
			os.Stdout.Write(block)
		}
		if f := arg(1, ""); f != "" {
			os.WriteFile(f, []byte(strconv.FormatInt(int64(time.Since(start)), 10)), 0o644)
		}
		return 0
	case "longline": // one line of N MiB
		n := atoi(arg(0, "20"))
		chunk := []byte(strings.Repeat("y", 1<<20))
		for i := 0; i < n; i++ {
			os.Stdout.Write(chunk)
		}
		os.Stdout.Write([]byte("\nloss: 0.5\n"))
		return 0
	case "binary":
		b := make([]byte, 1<<20)
		rand.Read(b)
		os.Stdout.Write(b)
		os.Stdout.Write([]byte("\xff\xfe loss=0.25 \xc3\x28\n"))
		return 0
	case "stubborn": // ignore SIGINT and SIGTERM, start N stubborn grandchildren (the last one leaves the group with setsid), print their pids
		signal.Ignore(syscall.SIGINT, syscall.SIGTERM)
		n := atoi(arg(0, "3"))
		exe, _ := os.Executable()
		for i := 0; i < n; i++ {
			c := exec.Command(exe)
			c.Env = append(os.Environ(), childEnv+"=sleeper")
			if i == n-1 {
				c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			}
			if err := c.Start(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			fmt.Fprintf(w, "grandchild %d\n", c.Process.Pid)
		}
		fmt.Fprintln(w, "ready")
		w.Flush()
		time.Sleep(time.Minute)
		return 0
	case "escape": // start a grandchild that leaves the process group (setsid) holding stdout, then exit
		exe, _ := os.Executable()
		c := exec.Command(exe)
		c.Env = append(os.Environ(), childEnv+"=sleeper")
		c.Stdout = os.Stdout
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Fprintf(w, "escaped %d\nstep 1 loss=0.5\n", c.Process.Pid)
		return 0
	case "sleeper":
		signal.Ignore(syscall.SIGINT, syscall.SIGTERM)
		time.Sleep(time.Minute)
		return 0
	case "ctlstop": // on the control socket of the run in RUN_DIR arg 0, ask for a stop as arg 1 for reason arg 2
		if _, err := shimctl.Call(arg(0, ""), shimctl.Request{Op: "stop", By: arg(1, "alice"), Reason: arg(2, "stopped")}, 5*time.Second); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	case "polite": // exit 130 on SIGINT after saving
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGINT)
		fmt.Fprintln(w, "ready")
		w.Flush()
		select {
		case <-ch:
			fmt.Println("saving checkpoint")
			return 130
		case <-time.After(time.Minute):
			return 0
		}
	case "stderr-exit": // print lines to stderr and exit with status
		for _, l := range strings.Split(arg(0, ""), "|") {
			fmt.Fprintln(os.Stderr, l)
		}
		return atoi(arg(1, "1"))
	case "killself":
		fmt.Fprintln(w, "step 1 loss=0.5")
		w.Flush()
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		time.Sleep(time.Second)
		return 0
	case "nan":
		for i := 1; i <= 6; i++ {
			v := "0.5"
			if i > 2 {
				v = "nan"
			}
			fmt.Fprintf(w, "step %d loss=%s\n", i, v)
			w.Flush()
		}
		time.Sleep(time.Duration(atoi(arg(0, "0"))) * time.Millisecond)
		return 0
	case "nanlines": // a loss that turns NaN: "bar" as Lightning's progress bar prints it, "text" beside a finite val_loss, "recover" NaN for a while
		bar := "Epoch 0:  %d%%|####  | %d/100 [00:05<00:06, 8.9it/s, v_num=0, train_loss=%s, val_loss=0.523]\n"
		text := "step %[2]d train_loss=%[3]s val_loss=0.52\n"
		format, nan := text, func(i int) bool { return i > 2 }
		switch arg(0, "") {
		case "bar":
			format = bar
		case "recover":
			nan = func(i int) bool { return i > 2 && i <= 5 }
		case "evalonce": // Hugging Face's Trainer: a bar without values, an eval_loss that is NaN once
			fmt.Fprintf(w, " 10%%|#         | 1/10 [00:00<00:00, 10.00it/s]\n{'loss': 0.5, 'learning_rate': 1e-05, 'epoch': 0.1}\n")
			fmt.Fprintf(w, " 20%%|##        | 2/10 [00:00<00:00, 10.00it/s]\n{'eval_loss': nan, 'eval_runtime': 1.0, 'epoch': 0.2}\n")
			for i := 3; i <= 10; i++ {
				fmt.Fprintf(w, " %d%%|###       | %d/10 [00:00<00:00, 10.00it/s]\n", i*10, i)
			}
			fmt.Fprintf(w, "{'loss': 0.4, 'learning_rate': 1e-05, 'epoch': 1.0}\n")
			return 0
		}
		for i := 1; i <= 8; i++ {
			v := fmt.Sprintf("%.3f", 1/float64(i))
			if nan(i) {
				v = "nan"
			}
			fmt.Fprintf(w, format, i, i, v)
			w.Flush()
		}
		return 0
	case "names": // a loss, then N metrics of names never seen again (per-image scores), then the loss again
		n := atoi(arg(0, "2000"))
		fmt.Fprintln(w, "step 1 loss=0.5")
		for i := 0; i < n; i++ {
			fmt.Fprintf(w, "img_%07d.jpg: 0.5\n", i)
		}
		fmt.Fprintln(w, "step 2 loss=0.25 val_loss=0.3")
		return 0
	case "quiet": // print once, then stay silent
		fmt.Fprintln(w, "step 1 loss=0.5")
		w.Flush()
		time.Sleep(time.Duration(atoi(arg(0, "5000"))) * time.Millisecond)
		return 0
	case "fitbatch": // run out of CUDA memory when the batch (arg 0) is above arg 1 (asking 2 GiB per 64 examples, or 8 GiB whatever the batch with arg 3 "fixed"); else train for arg 2 ms
		if bs := atoi(arg(0, "0")); bs > atoi(arg(1, "0")) {
			tried := 2 * float64(bs) / 64
			if arg(3, "") == "fixed" {
				tried = 8
			}
			fmt.Fprintf(os.Stderr, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate %.2f GiB. GPU 0 has a total capacity of 7.79 GiB of which 1.00 GiB is free.\n", tried)
			return 1
		}
		fmt.Fprintf(w, "step 1 loss=0.5 batch=%s\n", arg(0, ""))
		w.Flush()
		time.Sleep(time.Duration(atoi(arg(2, "0"))) * time.Millisecond)
		return 0
	case "oomhang": // run out of CUDA memory, then hang (a rank waiting for the others) until SIGINT
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGINT)
		fmt.Fprintln(os.Stderr, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 7.79 GiB of which 1.00 GiB is free.")
		select {
		case <-ch:
		case <-time.After(time.Minute):
		}
		return 1
	case "metricsfile": // report through TRAINBOT_METRICS_FILE only; "nonl": the last line has no newline
		f, err := os.OpenFile(os.Getenv("TRAINBOT_METRICS_FILE"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return 1
		}
		for i := 1; i <= 5; i++ {
			fmt.Fprintf(f, "{\"step\": %d, \"loss\": %g}", i*10, 1/float64(i))
			if i < 5 || arg(0, "") != "nonl" {
				fmt.Fprintln(f)
			}
		}
		f.Close()
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown child mode", mode)
	return 2
}
