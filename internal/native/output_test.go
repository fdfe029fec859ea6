package native

import (
	"bytes"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/supervise"
)

// The report keeps the head and the tail of an in-process run's log,
// however long, and the log and the sink get every byte.
func TestInProcessOutputBounded(t *testing.T) {
	var log bytes.Buffer
	var streamed int
	o := &output{sink: func(_ supervise.Stream, p []byte) { streamed += len(p) }, log: &log}
	if got := o.headTail(); got != "" {
		t.Errorf("empty: %q", got)
	}
	o.Write([]byte("first line\n"))
	if got := o.headTail(); got != "first line\n" {
		t.Errorf("short: %q", got)
	}
	var all strings.Builder
	all.WriteString("first line\n")
	for i := range 5000 {
		line := strings.Repeat(string(rune('a'+i%26)), i%97) + "\n"
		all.WriteString(line)
		o.Write([]byte(line))
	}
	got := o.headTail()
	if len(got) > adapter.TailBytes+100 {
		t.Errorf("%d bytes kept", len(got))
	}
	s := all.String()
	if want := adapter.HeadTail(s, adapter.TailBytes); got != want {
		t.Errorf("head and tail differ from a CLI's:\n got %q…\nwant %q…", got[:80], want[:80])
	}
	if log.String() != s || streamed != len(s) {
		t.Errorf("log %d bytes, streamed %d, wrote %d", log.Len(), streamed, len(s))
	}
}
