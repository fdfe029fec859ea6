package native

import (
	"fmt"
	"io"
	"sync"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/supervise"
)

// output is where a native task's events go, one Write each: to the
// task's Output as stdout (the OUTPUT stream, which `controller logs -f`
// follows), to its Log, and into the head and tail its Exit keeps for the
// report. A write never fails, so a full disk does not cut the live
// stream; the first log error is kept.
type output struct {
	sink func(supervise.Stream, []byte)
	log  io.Writer

	mu         sync.Mutex
	head, tail []byte
	omitted    int64
	logErr     error
}

func (o *output) Write(p []byte) (int, error) {
	if o.sink != nil {
		o.sink(supervise.Stdout, p)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.log != nil {
		if _, err := o.log.Write(p); err != nil && o.logErr == nil {
			o.logErr = err
		}
	}
	const half = adapter.TailBytes / 2
	rest := p
	if n := min(half-len(o.head), len(rest)); n > 0 {
		o.head, rest = append(o.head, rest[:n]...), rest[n:]
	}
	o.tail = append(o.tail, rest...)
	if cut := len(o.tail) - half; cut > half { // trim in steps, not on every write
		o.omitted += int64(cut)
		o.tail = append(o.tail[:0], o.tail[cut:]...)
	}
	return len(p), nil
}

// headTail is the log's head and tail, cut as adapter.HeadTail cuts a
// CLI's stdout.
func (o *output) headTail() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	const half = adapter.TailBytes / 2
	tail, omitted := o.tail, o.omitted
	if cut := len(tail) - half; cut > 0 {
		tail, omitted = tail[cut:], omitted+int64(cut)
	}
	if omitted == 0 {
		return string(o.head) + string(tail)
	}
	return fmt.Sprintf("%s\n…[%d bytes omitted; the full log is in the object store]…\n%s", o.head, omitted, tail)
}

func (o *output) err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.logErr
}
