package termsafe

import (
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"golang.org/x/term"
)

// Line escapes s for one line of output: every control character,
// newline and tab included.
func Line(s string) string { return escape(s, false) }

// Text escapes s for multi-line output: newline and tab stay as they are.
func Text(s string) string { return escape(s, true) }

func escape(s string, multiline bool) string {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if unsafe(r, size, multiline) {
			break
		}
		i += size
	}
	if i == len(s) {
		return s // the common case: nothing to escape, no copy
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	appendEscaped(&b, s[i:], multiline)
	return b.String()
}

func appendEscaped(b *strings.Builder, s string, multiline bool) {
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		if unsafe(r, size, multiline) {
			writeEscape(b, r, size, s[0])
		} else {
			b.WriteString(s[:size])
		}
		s = s[size:]
	}
}

// unsafe reports whether the rune r (size bytes) must be escaped.
func unsafe(r rune, size int, multiline bool) bool {
	switch {
	case r == utf8.RuneError && size <= 1:
		return true // invalid UTF-8
	case r == '\n' || r == '\t':
		return !multiline
	case r < 0x20 || r == 0x7f:
		return true // C0 controls (ESC, BEL, CR, BS, ...) and DEL
	case r >= 0x80 && r < 0xa0:
		return true // C1 controls: U+009B is a CSI to some terminals
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true // bidirectional controls: they reorder what is shown
	case r == 0x2028 || r == 0x2029:
		return true // line and paragraph separators
	}
	return false
}

func writeEscape(b *strings.Builder, r rune, size int, first byte) {
	switch {
	case r == utf8.RuneError && size <= 1:
		fmt.Fprintf(b, `\x%02x`, first)
	case r == '\a':
		b.WriteString(`\a`)
	case r == '\b':
		b.WriteString(`\b`)
	case r == '\f':
		b.WriteString(`\f`)
	case r == '\n':
		b.WriteString(`\n`)
	case r == '\r':
		b.WriteString(`\r`)
	case r == '\t':
		b.WriteString(`\t`)
	case r == '\v':
		b.WriteString(`\v`)
	case r < 0x80:
		fmt.Fprintf(b, `\x%02x`, r)
	default:
		fmt.Fprintf(b, `\u%04x`, r)
	}
}

// Writer escapes multi-line text on its way to w (as Text), a stream at a
// time: a UTF-8 sequence split across two writes is held until it is
// whole. Flush writes what is held when the stream ends.
type Writer struct {
	w       io.Writer
	pending []byte
	buf     strings.Builder
}

// NewWriter returns a Writer to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write escapes p and writes it; it reports len(p) when all was written.
func (w *Writer) Write(p []byte) (int, error) {
	data := p
	if len(w.pending) > 0 {
		data = append(w.pending, p...)
		w.pending = nil
	}
	// Hold an incomplete rune at the end: at most 3 bytes.
	cut := len(data)
	for k := 1; k <= utf8.UTFMax-1 && k <= len(data); k++ {
		start := len(data) - k
		if utf8.RuneStart(data[start]) {
			if !utf8.FullRune(data[start:]) {
				cut = start
			}
			break
		}
	}
	w.pending = append(w.pending[:0], data[cut:]...)
	w.buf.Reset()
	appendEscaped(&w.buf, string(data[:cut]), true)
	if _, err := io.WriteString(w.w, w.buf.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes, escaped, the bytes held back as an incomplete rune.
func (w *Writer) Flush() error {
	if len(w.pending) == 0 {
		return nil
	}
	w.buf.Reset()
	appendEscaped(&w.buf, string(w.pending), true)
	w.pending = nil
	_, err := io.WriteString(w.w, w.buf.String())
	return err
}

// Terminal is a writer that says whether it is a terminal: the test
// stand-in for one.
type Terminal interface {
	IsTerminal() bool
}

// IsTerminal reports whether w is a terminal: a Terminal that says so, or
// a file on a tty.
func IsTerminal(w io.Writer) bool {
	switch t := w.(type) {
	case Terminal:
		return t.IsTerminal()
	case *os.File:
		return term.IsTerminal(int(t.Fd()))
	}
	return false
}
