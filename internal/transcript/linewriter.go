package transcript

import (
	"bytes"
	"errors"
	"io"
	"sync"
)

// ErrClosed is returned by a LineWriter's Write after Close.
var ErrClosed = errors.New("transcript: write to closed line writer")

// NewLineWriter adapts p to a byte stream: it splits what is written on
// '\n' and hands p one line at a time, keeping a partial line across
// Writes. A line longer than MaxLine is cut to MaxLine (the rest is
// dropped up to its newline). Close hands over a last line with no newline.
// Use one LineWriter per stream; it never returns a write error before Close.
func NewLineWriter(p Parser, s Stream) io.WriteCloser {
	return &lineWriter{p: p, s: s}
}

type lineWriter struct {
	mu     sync.Mutex
	p      Parser
	s      Stream
	buf    []byte
	long   bool // the current line passed MaxLine; the rest is dropped
	closed bool
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, ErrClosed
	}
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			w.add(b)
			break
		}
		if len(w.buf) == 0 && !w.long && i <= MaxLine {
			w.p.Line(w.s, b[:i]) // a whole line: no copy
		} else {
			w.add(b[:i])
			w.flush()
		}
		b = b[i+1:]
	}
	return n, nil
}

func (w *lineWriter) add(b []byte) {
	if w.long {
		return
	}
	if room := MaxLine - len(w.buf); len(b) > room {
		b, w.long = b[:room], true
	}
	w.buf = append(w.buf, b...)
}

func (w *lineWriter) flush() {
	w.p.Line(w.s, w.buf)
	w.long = false
	if cap(w.buf) > 64<<10 {
		w.buf = nil // do not hold a long line's buffer for the rest of the run
	} else {
		w.buf = w.buf[:0]
	}
}

// Close hands over the last partial line, if any. Closing twice is a no-op.
func (w *lineWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	if len(w.buf) > 0 || w.long {
		w.flush()
	}
	w.buf = nil
	return nil
}
