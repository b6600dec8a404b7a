package termsafe

import "testing"

func TestString(t *testing.T) {
	for _, c := range []struct{ name, in, want, field string }{
		{"plain", "loss 0.25 · 损失 ✅", "loss 0.25 · 损失 ✅", "loss 0.25 · 损失 ✅"},
		{"lines and tabs", "a\tb\nc", "a\tb\nc", `a\tb\nc`},
		{"clear screen", "\x1b[2J\x1b[Hgot you", `\x1b[2J\x1b[Hgot you`, `\x1b[2J\x1b[Hgot you`},
		{"window title", "\x1b]0;pwned\x07", `\x1b]0;pwned\x07`, `\x1b]0;pwned\x07`},
		{"carriage return", "fake\r real", `fake\r real`, `fake\r real`},
		{"NUL, BS, DEL", "a\x00b\x08c\x7f", `a\x00b\x08c\x7f`, `a\x00b\x08c\x7f`},
		{"C1 CSI", "x\u009b31my", `x\u009b31my`, `x\u009b31my`},
		{"C1 bounds", "\u0080\u009f\u00a0", `\u0080\u009f` + "\u00a0", `\u0080\u009f` + "\u00a0"},
		{"not UTF-8", "a\xff\x9bb\xe4\xb8", `a\xff\x9bb\xe4\xb8`, `a\xff\x9bb\xe4\xb8`},
		{"replacement char kept", "\uFFFD", "\uFFFD", "\uFFFD"},
		{"empty", "", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := String(c.in); got != c.want {
				t.Errorf("String(%q) = %q, want %q", c.in, got, c.want)
			}
			if got := Field(c.in); got != c.field {
				t.Errorf("Field(%q) = %q, want %q", c.in, got, c.field)
			}
		})
	}
}

// Whatever goes in, nothing a terminal acts on comes out.
func FuzzString(f *testing.F) {
	for _, s := range []string{"\x1b[31mred", "a\nb", "\u009b", "\xff", "损失"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, out := range []string{String(s), Field(s)} {
			if i := firstUnsafe(out, false); i >= 0 {
				t.Fatalf("%q escaped to %q, which has %q at %d", s, out, out[i:], i)
			}
		}
		if i := firstUnsafe(Field(s), true); i >= 0 {
			t.Fatalf("Field(%q) has a newline or tab at %d", s, i)
		}
	})
}

// A clean line costs one scan and no allocation; a line with escapes one
// copy.
func BenchmarkString(b *testing.B) {
	clean := "✅ #12 train finished 2h13m · started 3h ago · 12000 steps · loss 0.2311 · peak GPU 14.20 GiB · 📝 bs 64 with warmup"
	dirty := "\x1b[32m" + clean + "\x1b[0m"
	for _, c := range []struct{ name, s string }{{"clean", clean}, {"escapes", dirty}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.s)))
			for b.Loop() {
				String(c.s)
			}
		})
	}
}

func TestArgv(t *testing.T) {
	for _, c := range []struct {
		argv []string
		want string
	}{
		{[]string{"python3", "train.py", "--lr", "0.1"}, "python3 train.py --lr 0.1"},
		{[]string{"sh", "-c", "echo $HOME; ls"}, `sh -c "echo $HOME; ls"`},
		{[]string{"chmod", "700", "/data/my runs"}, `chmod 700 "/data/my runs"`},
		{[]string{"echo", ""}, `echo ""`},
		{[]string{"it's", `a"b`, `c\d`, "~/x", "*.pt"}, `"it's" "a\"b" "c\\d" "~/x" "*.pt"`},
		{nil, ""},
	} {
		if got := Argv(c.argv); got != c.want {
			t.Errorf("Argv(%q) = %s, want %s", c.argv, got, c.want)
		}
	}
}
