package attempt

import (
	"io"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/supervise"
	"github.com/drover-dev/drover/internal/transcript"
)

// outputReader feeds the CLI's output, line by line, to the adapter's parser
// while it also goes to the output sink. Both streams arrive on their own
// goroutines; transcript parsers are safe for that.
type outputReader struct {
	parser  transcript.Parser
	streams map[supervise.Stream]io.WriteCloser
}

func newOutputReader(ad adapter.Adapter) *outputReader {
	or, ok := ad.(adapter.OutputReader)
	if !ok {
		return &outputReader{}
	}
	r := &outputReader{parser: or.NewParser()}
	r.streams = map[supervise.Stream]io.WriteCloser{
		supervise.Stdout: transcript.NewLineWriter(r.parser, transcript.Stdout),
		supervise.Stderr: transcript.NewLineWriter(r.parser, transcript.Stderr),
	}
	return r
}

// tee returns the OnOutput callback: the sink first, then the parser.
func (r *outputReader) tee(sink OutputSink) func(supervise.Stream, []byte) {
	return func(s supervise.Stream, p []byte) {
		if sink != nil {
			sink(s, p)
		}
		if w := r.streams[s]; w != nil {
			_, _ = w.Write(p)
		}
	}
}

// summary flushes partial last lines and returns what the parser read, or
// nil for an adapter without one.
func (r *outputReader) summary(exitCode int) *transcript.Summary {
	if r.parser == nil {
		return nil
	}
	for _, w := range r.streams {
		_ = w.Close()
	}
	return r.parser.Summary(exitCode)
}
