package i18n

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The checks a Chinese text is held to (the catalog's tests and the tests
// that walk a whole Chinese chat session use them): no English outside the
// words Chinese practitioners write in English, and every command word
// quoted 「开始」 where it stands for something to send.

// LatinKept are the Latin words a Chinese text may hold: the ML terms kept
// in English (loss, batch, OOM, checkpoint, epoch…), names of products,
// libraries, units, signals and the system's own words. Identifiers
// (with _ . / or $, or all capitals), numbers and fmt verbs pass anyway.
var LatinKept = map[string]bool{
	"loss": true, "batch": true, "size": true, "OOM": true, "checkpoint": true, "epoch": true, "GPU": true,
	"NaN": true, "Inf": true, "EMA": true, "R": true, "bug": true, "kernel": true, "worker": true, "live": true,
	"CUDA": true, "NVML": true, "NVIDIA": true, "NVLink": true, "ECC": true, "Xid": true, "GSP": true, "RPC": true,
	"PyTorch": true, "TensorFlow": true, "JAX": true, "Go": true, "Adam": true, "XLA": true, "DataLoader": true, "GradScaler": true,
	"Hugging": true, "Face": true, "Slurm": true,
	"Slack": true, "Webhook": true, "Discord": true, "ntfy": true, "Bark": true, "Server": true, "PushPlus": true, // push services (Server酱)
	"MaxRSS": true, "MemAvailable": true, "MinJobAge": true,
	"VmHWM": true, "cgroup": true, "sstat": true, "stderr": true, "trainbot": true, "nvidia": true, "smi": true,
	"pid": true, "boot": true, "id": true, "ID": true, "killer": true, "kill": true, "env": true, "dtype": true,
	"true": true, "false": true, "True": true, "fp16": true, "bf16": true, "cuda": true,
	"GiB": true, "MiB": true, "KiB": true, "TiB": true, "B": true, "GB": true, "MB": true, "G": true, "M": true, "C": true,
	"N": true, "n": true, "https": true, "cgo": true, "nonvml": true, "tags": true, "bs": true, "lr": true, "mnist": true, "val": true, "acc": true,
	// TOML snippets and command lines quoted in the texts.
	"auth": true, "operators": true, "jobs": true, "dirs": true, "watch": true, "log": true, "pid_file": true,
	"type": true, "float": true, "min": true, "max": true, "signals": true, "docs": true, "md": true,
}

var (
	latinWord = regexp.MustCompile(`[A-Za-z][A-Za-z0-9]*`)
	fmtVerb   = regexp.MustCompile(`%(\[\d+\])?[-+# 0]*[\d.]*[a-zA-Z%]`)
	// tokens that are identifiers, paths, flags or numbers as a whole
	identifier = regexp.MustCompile(`[A-Za-z0-9_$./*:\-]*[_$./*:\-][A-Za-z0-9_$./*:\-]*|\b[A-Z][A-Z0-9]+\b|\b[0-9][0-9a-zA-Z.]*\b`)
)

// LatinOutside returns the Latin words of s outside LatinKept, identifiers
// and fmt verbs: what a Chinese reader would read as English prose.
func LatinOutside(s string) []string {
	s = fmtVerb.ReplaceAllString(s, " ")
	s = identifier.ReplaceAllString(s, " ")
	var out []string
	for _, w := range latinWord.FindAllString(s, -1) {
		if !LatinKept[w] {
			out = append(out, w)
		}
	}
	return out
}

// BareCommandWords returns the command words of s that stand for
// something to send but are not quoted 「…」. A command word stands for
// a command when no Chinese character touches it (a word of the prose, as
// 开始 in 开始训练 or 取消 in 已取消, has one) and it follows a verb of
// sending (发送 停止, 例如 日志 50), or arguments follow it (停止 12,
// 取消 N, 日志 %d), or it begins the text or a line (审计 后面跟…). Nouns
// that stand alone so (a heading "任务：") are the caller's to allow.
func BareCommandWords(s string, words []string) []string {
	var out []string
	depth := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch r {
		case '「':
			depth++
		case '」':
			depth = max(depth-1, 0)
		}
		if depth == 0 {
			for _, w := range words {
				if w == "" || !strings.HasPrefix(s[i:], w) {
					continue
				}
				head, tail := s[:i], s[i+len(w):]
				before, _ := utf8.DecodeLastRuneInString(head)
				after, _ := utf8.DecodeRuneInString(tail)
				if isHan(before) || isHan(after) {
					continue
				}
				lead := strings.TrimRight(head, " ")
				sent := false
				for _, v := range sendVerbs {
					sent = sent || strings.HasSuffix(lead, v)
				}
				args := strings.HasPrefix(tail, " ") && len(tail) > 1 && strings.ContainsRune("0123456789%[NAabcdefghijklmnopqrstuvwxyz…", rune(tail[1]))
				first := strings.TrimSpace(lead) == "" || strings.HasSuffix(lead, "\n") || strings.HasSuffix(lead, "（")
				if sent || args || first && strings.HasPrefix(tail, " ") {
					out = append(out, w)
				}
			}
		}
		i += n
	}
	return out
}

// sendVerbs are the words after which a command word is something to send.
var sendVerbs = []string{"发送", "输入", "发", "例如", "例如：", "用", "或"}

// QuotedNotCommands returns what s quotes 「…」 that does not begin with
// one of the command words (or a fmt verb that the caller fills with
// one): the brackets are kept for commands.
func QuotedNotCommands(s string, words []string) []string {
	var out []string
	for rest := s; ; {
		i := strings.Index(rest, "「")
		if i < 0 {
			return out
		}
		rest = rest[i+len("「"):]
		j := strings.Index(rest, "」")
		if j < 0 {
			return append(out, rest)
		}
		q := rest[:j]
		rest = rest[j:]
		ok := strings.HasPrefix(q, "%")
		for _, w := range words {
			ok = ok || w != "" && strings.HasPrefix(q, w)
		}
		if !ok {
			out = append(out, q)
		}
	}
}

func isHan(r rune) bool { return unicode.Is(unicode.Han, r) }
