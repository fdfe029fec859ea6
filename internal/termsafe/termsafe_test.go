package termsafe

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLineAndText(t *testing.T) {
	for _, tc := range []struct{ name, in, line, text string }{
		{"plain", "hello, wörld ✓", "hello, wörld ✓", "hello, wörld ✓"},
		{"ESC CSI", "a\x1b[2Jb", `a\x1b[2Jb`, `a\x1b[2Jb`},
		{"OSC 52 clipboard", "\x1b]52;c;cm0gLXJmIH4=\x07", `\x1b]52;c;cm0gLXJmIH4=\a`, `\x1b]52;c;cm0gLXJmIH4=\a`},
		{"title", "\x1b]0;pwned\x1b\\", `\x1b]0;pwned\x1b\`, `\x1b]0;pwned\x1b\`},
		{"BEL", "ding\a", `ding\a`, `ding\a`},
		{"CR rewrites the line", "ok\rFAILED", `ok\rFAILED`, `ok\rFAILED`},
		{"backspace", "rm -rf /\b\b\b\b\b\b\b\bls", `rm -rf /\b\b\b\b\b\b\b\bls`, `rm -rf /\b\b\b\b\b\b\b\bls`},
		{"C1 CSI as UTF-8", "a\u009b31mred", `a\u009b31mred`, `a\u009b31mred`},
		{"C1 CSI as a lone byte", "a\x9b31mred", `a\x9b31mred`, `a\x9b31mred`},
		{"invalid UTF-8", "\xff\xfe ok \xc3", `\xff\xfe ok \xc3`, `\xff\xfe ok \xc3`},
		{"DEL and NUL", "a\x7fb\x00c", `a\x7fb\x00c`, `a\x7fb\x00c`},
		{"bidi override", "user\u202Etxt.exe", `user\u202etxt.exe`, `user\u202etxt.exe`},
		{"newline and tab", "a\tb\nc", `a\tb\nc`, "a\tb\nc"},
		{"CRLF", "a\r\nb", `a\r\nb`, "a\\r\nb"},
		{"line separator", "a\u2028b", `a\u2028b`, `a\u2028b`},
		{"empty", "", "", ""},
	} {
		if got := Line(tc.in); got != tc.line {
			t.Errorf("%s: Line = %q, want %q", tc.name, got, tc.line)
		}
		if got := Text(tc.in); got != tc.text {
			t.Errorf("%s: Text = %q, want %q", tc.name, got, tc.text)
		}
		for _, out := range []string{Line(tc.in), Text(tc.in)} {
			if !utf8.ValidString(out) || strings.ContainsAny(out, "\x1b\a\r\b\x00\x7f\u009b") {
				t.Errorf("%s: %q still holds a control or invalid UTF-8", tc.name, out)
			}
		}
	}
}

// TestWriterSplitRunes: the writer gives the same output whatever the
// chunking, a rune split across writes included.
func TestWriterSplitRunes(t *testing.T) {
	in := "héllo ✓ \x1b[31mred\x1b[0m\n€\xff\xc3"
	want := Text(in)
	for size := 1; size <= len(in); size++ {
		var out bytes.Buffer
		w := NewWriter(&out)
		for i := 0; i < len(in); i += size {
			j := min(i+size, len(in))
			n, err := w.Write([]byte(in[i:j]))
			if err != nil || n != j-i {
				t.Fatalf("Write: %d, %v", n, err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if out.String() != want {
			t.Errorf("chunks of %d: %q, want %q", size, out.String(), want)
		}
	}
}

type fakeTerminal struct{ bytes.Buffer }

func (*fakeTerminal) IsTerminal() bool { return true }

func TestIsTerminal(t *testing.T) {
	if !IsTerminal(&fakeTerminal{}) || IsTerminal(&bytes.Buffer{}) {
		t.Error("IsTerminal of a fake terminal and a buffer")
	}
}

func FuzzText(f *testing.F) {
	f.Add("a\x1b[2J\u009b\xff\n\t")
	f.Fuzz(func(t *testing.T, s string) {
		for _, out := range []string{Line(s), Text(s)} {
			if !utf8.ValidString(out) {
				t.Fatalf("%q -> invalid UTF-8 %q", s, out)
			}
			for _, r := range out {
				if unsafe(r, utf8.RuneLen(r), true) {
					t.Fatalf("%q -> %q holds %U", s, out, r)
				}
			}
		}
		if strings.ContainsAny(Line(s), "\n\t") {
			t.Fatalf("Line(%q) holds a newline or tab", s)
		}
		var b bytes.Buffer
		w := NewWriter(&b)
		half := len(s) / 2
		_, _ = w.Write([]byte(s[:half]))
		_, _ = w.Write([]byte(s[half:]))
		_ = w.Flush()
		if b.String() != Text(s) {
			t.Fatalf("Writer(%q) = %q, Text = %q", s, b.String(), Text(s))
		}
	})
}
