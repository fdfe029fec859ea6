package console

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCleanTerminal(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain\ttext\n", "plain\ttext\n"},
		{"\x1b[31mred\x1b[0m", "red"},
		{"\x1b[38;5;196mx\x1b[1;2;3m", "x"},
		{"\x1b]0;evil title\x07after", "after"},
		{"\x1b]8;;javascript:alert(1)\x1b\\click\x1b]8;;\x1b\\", "click"},
		{"a\x1bPdcs data\x1b\\b", "ab"},
		{"\x1b(Bx", "x"},
		{"\x1b7\x1b8y", "y"},
		{"line\r\nnext\rover", "line\nnext\nover"},
		{"bell\x07nul\x00", "bell\u2407nul\u2400"},
		{"del\x7f", "del\u2421"},
		{"c1 \u0085 and csi \u009b31mred", "c1 \uFFFD and csi red"},
		{"bidi \u202eevil\u202c", "bidi \uFFFDevil\uFFFD"},
		{"bad \xff\xfe utf8", "bad \uFFFD\uFFFD utf8"},
		{"<script>alert(1)</script>", "<script>alert(1)</script>"}, // HTML is escaped where it is shown
		{"unfinished \x1b[31", "unfinished "},
	} {
		if got := cleanTerminal(c.in); got != c.want {
			t.Errorf("cleanTerminal(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestTermTextAcrossChunks(t *testing.T) {
	in := "a\x1b[31mb\x1b]0;title\x07c\r\nd é ✓ \x1b[0m" + strings.Repeat("x", 10)
	want := cleanTerminal(in)
	// Every split into two chunks gives the same text.
	for i := range len(in) + 1 {
		var tt termText
		got := tt.write(in[:i]) + tt.write(in[i:]) + tt.flush()
		if got != want {
			t.Fatalf("split at %d: %q, want %q", i, got, want)
		}
	}
	// One byte at a time too.
	var tt termText
	var b strings.Builder
	for i := range len(in) {
		b.WriteString(tt.write(in[i : i+1]))
	}
	b.WriteString(tt.flush())
	if b.String() != want {
		t.Fatalf("bytewise: %q, want %q", b.String(), want)
	}
}

func TestTermTextBoundsWhatItHolds(t *testing.T) {
	var tt termText
	out := tt.write("x\x1b]" + strings.Repeat("a", 2*maxCarry))
	if out != "x" || len(tt.carry) != 0 {
		t.Fatalf("out %q, holding %d bytes", out, len(tt.carry))
	}
}

func FuzzCleanTerminal(f *testing.F) {
	for _, s := range []string{"\x1b[31mx", "\x1b]8;;u\x1b\\", "a\r\nb", "\u009b1m", "\xff", "\u202e"} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, s string, cut int) {
		out := cleanTerminal(s)
		if !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 out of %q", s)
		}
		for _, r := range out {
			if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || r >= 0x80 && r < 0xa0 || bidiControl(r) {
				t.Fatalf("control %U left in %q (from %q)", r, out, s)
			}
		}
		if cut < 0 || cut > len(s) {
			return
		}
		var tt termText
		if got := tt.write(s[:cut]) + tt.write(s[cut:]) + tt.flush(); got != out {
			t.Fatalf("split at %d of %q: %q, want %q", cut, s, got, out)
		}
	})
}
