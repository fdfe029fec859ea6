package redact

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"regexp"
	"sort"
	"strings"
)

// Mask replaces every secret value.
const Mask = "[REDACTED]"

// MinLen is the shortest value treated as a secret: shorter ones ("1",
// "true") would mask ordinary text and protect nothing.
const MinLen = 6

// secretName matches variable names that hold credentials.
var secretName = regexp.MustCompile(`(?i)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION)`)

// IsSecretName reports whether an environment variable's name says it holds
// a credential (ANTHROPIC_API_KEY, GH_TOKEN, …).
func IsSecretName(name string) bool { return secretName.MatchString(name) }

// Redactor masks a fixed set of values. The zero value and nil mask nothing.
type Redactor struct {
	values [][]byte // longest first, so a secret containing another is masked whole
	maxLen int
}

// New returns a redactor for the given values; short and duplicate values
// are ignored.
func New(values ...string) *Redactor {
	seen := map[string]bool{}
	r := &Redactor{}
	for _, v := range values {
		if len(v) < MinLen || seen[v] {
			continue
		}
		seen[v] = true
		r.values = append(r.values, []byte(v))
		r.maxLen = max(r.maxLen, len(v))
	}
	sort.Slice(r.values, func(i, j int) bool { return len(r.values[i]) > len(r.values[j]) })
	return r
}

// FromEnv returns a redactor for the values of the named variables that are
// set in the process environment or in extra (NAME=value entries).
func FromEnv(names []string, extra []string) *Redactor {
	var values []string
	for _, n := range names {
		if v, ok := os.LookupEnv(n); ok {
			values = append(values, v)
		}
	}
	for _, kv := range extra {
		if _, v, ok := strings.Cut(kv, "="); ok {
			values = append(values, v)
		}
	}
	return New(values...)
}

// Empty reports whether the redactor masks nothing.
func (r *Redactor) Empty() bool { return r == nil || len(r.values) == 0 }

// MaxLen is the length of the longest secret: a streaming caller holds back
// MaxLen-1 bytes so that a secret split across two writes is still masked.
func (r *Redactor) MaxLen() int {
	if r == nil {
		return 0
	}
	return r.maxLen
}

// Bytes returns b with every secret masked. It returns b itself when nothing
// matched.
func (r *Redactor) Bytes(b []byte) []byte {
	if r.Empty() {
		return b
	}
	for _, v := range r.values {
		if bytes.Contains(b, v) {
			b = bytes.ReplaceAll(b, v, []byte(Mask))
		}
	}
	return b
}

// String returns s with every secret masked.
func (r *Redactor) String(s string) string {
	if r.Empty() {
		return s
	}
	for _, v := range r.values {
		s = strings.ReplaceAll(s, string(v), Mask)
	}
	return s
}

// Handler wraps a slog.Handler so that messages and string attributes of
// every record are masked.
func Handler(h slog.Handler, r *Redactor) slog.Handler {
	if r.Empty() {
		return h
	}
	return &handler{next: h, r: r}
}

type handler struct {
	next slog.Handler
	r    *Redactor
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *handler) attr(a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.String(a.Value.String()))
	case slog.KindGroup:
		attrs := a.Value.Group()
		out := make([]any, len(attrs))
		for i, g := range attrs {
			out[i] = h.attr(g)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		if err, ok := a.Value.Any().(error); ok {
			return slog.String(a.Key, h.r.String(err.Error()))
		}
		return slog.String(a.Key, h.r.String(a.Value.String()))
	}
	return a
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		out[i] = h.attr(a)
	}
	return &handler{next: h.next.WithAttrs(out), r: h.r}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{next: h.next.WithGroup(name), r: h.r}
}

// Writer masks secrets in a stream. It holds back the last MaxLen-1 bytes
// of what it was given, so a secret split across two writes is masked
// whole; Close writes the rest.
func Writer(w io.Writer, r *Redactor) io.WriteCloser {
	return &writer{w: w, r: r}
}

type writer struct {
	w   io.Writer
	r   *Redactor
	buf []byte
	err error
}

func (x *writer) Write(p []byte) (int, error) {
	if x.err != nil {
		return 0, x.err
	}
	if x.r.Empty() {
		_, x.err = x.w.Write(p)
		return len(p), x.err
	}
	x.buf = x.r.Bytes(append(x.buf, p...))
	if keep := x.r.MaxLen() - 1; len(x.buf) > keep {
		n := len(x.buf) - keep
		_, x.err = x.w.Write(x.buf[:n])
		x.buf = append(x.buf[:0], x.buf[n:]...)
	}
	return len(p), x.err
}

func (x *writer) Close() error {
	if x.err == nil && len(x.buf) > 0 {
		_, x.err = x.w.Write(x.r.Bytes(x.buf))
		x.buf = nil
	}
	return x.err
}
