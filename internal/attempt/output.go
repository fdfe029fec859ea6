package attempt

import (
	"io"
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/supervise"
	"github.com/drover-dev/drover/internal/transcript"
)

// outputReader feeds the task's output, line by line, to the runtime's
// parser (adapter.OutputReader) while it also goes to the output sink. Both
// streams arrive on their own goroutines; transcript parsers are safe for
// that. A runtime that reads no CLI output (the native runtime) has no
// parser: its output only goes to the sink.
type outputReader struct {
	parser  transcript.Parser
	limit   time.Duration // the runtime's own_retry_timeout
	streams map[supervise.Stream]io.WriteCloser
	watch   *stopWatch   // nil without a parser
	denied  *denialWatch // nil unless watchDenials
}

func newOutputReader(ad adapter.Adapter) *outputReader {
	or, ok := ad.(adapter.OutputReader)
	if !ok {
		return &outputReader{}
	}
	r := &outputReader{parser: or.NewParser(), limit: or.OwnRetryTimeout()}
	r.watch = newStopWatch(r.parser, r.limit)
	r.streams = map[supervise.Stream]io.WriteCloser{
		supervise.Stdout: transcript.NewLineWriter(r.parser, transcript.Stdout),
		supervise.Stderr: transcript.NewLineWriter(r.parser, transcript.Stderr),
	}
	return r
}

// watchDenials has each line go to the sandbox's denial reader too,
// after the parser (tap), and a denialWatch stop the CLI stuck on a
// refusal: after its own_retry_timeout, unless a file in dir changed.
// Without a parser or a sandbox it does nothing: a runtime that reads no
// CLI output has the output of the processes it starts read through
// adapter.Confiner's Wrap (confined.Wrap).
func (r *outputReader) watchDenials(x *confined, dir string) {
	if r.parser == nil || x == nil {
		return
	}
	t := &tap{Parser: r.parser, den: x.den}
	t.counter, _ = r.parser.(transcript.ProgressCounter)
	r.streams = map[supervise.Stream]io.WriteCloser{
		supervise.Stdout: transcript.NewLineWriter(t, transcript.Stdout),
		supervise.Stderr: transcript.NewLineWriter(t, transcript.Stderr),
	}
	r.denied = newDenialWatch(x.den, r.limit, changedSince(dir), time.Now)
}

// tee returns the OnOutput callback: the sink first, then the parser.
func (r *outputReader) tee(sink OutputSink) func(supervise.Stream, []byte) {
	return func(s supervise.Stream, p []byte) {
		if sink != nil {
			sink(s, p)
		}
		if w := r.streams[s]; w != nil {
			_, _ = w.Write(p)
			r.watch.check()
			r.denied.check()
		}
	}
}

// summary flushes partial last lines and returns what the parser read, or
// nil for an adapter without one.
func (r *outputReader) summary(exitCode int) *transcript.Summary {
	if r.parser == nil {
		return nil
	}
	r.watch.close()
	for _, w := range r.streams {
		_ = w.Close()
	}
	r.denied.close()
	return r.parser.Summary(exitCode)
}

// waitStopping waits for the task, stopping it when the watch says so.
func (r *outputReader) waitStopping(h adapter.Handle) *adapter.Exit {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		select {
		case cause := <-r.watch.stops():
			h.Stop(cause)
		case <-quit:
		}
	}()
	res := h.Wait()
	close(quit)
	<-done
	return res
}

// stopWatch stops the CLI by what its output says while it runs
// (adapter.StopOn): at once on refused credentials or a rate limit the CLI
// gave up on, and after the runtime's own_retry_timeout of retrying either,
// measured from the first retry notice since the CLI last made progress. It is checked after each piece of output, and by a timer
// while a retrying CLI is silent (gemini waits up to 30 s between tries).
// Durations are those of a live process, on the monotonic clock, like
// package supervise's timeouts.
type stopWatch struct {
	parser transcript.Parser
	limit  time.Duration
	stop   chan error // buffered: the cause to stop the CLI with, once

	mu    sync.Mutex
	since time.Time // when the current streak of rate-limit retries began
	timer *time.Timer
	done  bool
}

func newStopWatch(parser transcript.Parser, limit time.Duration) *stopWatch {
	if limit <= 0 {
		limit = config.DefaultOwnRetryTimeout
	}
	return &stopWatch{parser: parser, limit: limit, stop: make(chan error, 1)}
}

// check reads the parser's verdict and acts on it.
func (w *stopWatch) check() {
	if w == nil {
		return
	}
	v := w.parser.Verdict()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return
	}
	switch adapter.StopOn(v) {
	case adapter.StopNow:
		w.fire(&adapter.StoppedByOutput{Failure: v.Failure})
	case adapter.StopAfterRetries:
		if w.since.IsZero() {
			w.since = time.Now()
			w.timer = time.AfterFunc(w.limit, w.check)
		} else if d := time.Since(w.since); d >= w.limit {
			w.fire(&adapter.StoppedByOutput{Failure: v.Failure, Retrying: d})
		}
	default:
		// Progress, or an error the CLI may get past: a new streak starts
		// from the next retry notice. A timer already firing finds the
		// streak reset and does nothing.
		w.since = time.Time{}
		w.stopTimer()
	}
}

// fire hands the stop's cause to the goroutine that waits for the CLI.
func (w *stopWatch) fire(cause error) {
	w.done = true
	w.stopTimer()
	w.stop <- cause // buffered, sent once
}

func (w *stopWatch) stopTimer() {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
}

// close stops watching; the CLI has ended.
func (w *stopWatch) close() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
	w.stopTimer()
}

// stops is the channel a stop's cause arrives on; nil, which never
// delivers, without a watch.
func (w *stopWatch) stops() <-chan error {
	if w == nil {
		return nil
	}
	return w.stop
}
