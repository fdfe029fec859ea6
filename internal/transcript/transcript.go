package transcript

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
)

// Kind says what an Event is.
type Kind string

// The kinds of Event.
const (
	KindAssistantText Kind = "assistant_text"
	KindToolCall      Kind = "tool_call"
	KindToolResult    Kind = "tool_result"
	KindResult        Kind = "result"
	KindError         Kind = "error"
	KindText          Kind = "text" // a line that did not parse, or plain text (stderr, Text format)
)

// Limits that keep a Parser's memory bounded whatever it is fed.
const (
	MaxLine    = 1 << 20 // longer lines are truncated to this many bytes
	MaxText    = 4 << 10 // Event.Text is cut to this many bytes
	MaxInput   = 4 << 10 // Event.Input larger than this is dropped
	MaxMessage = 1 << 10 // Failure.Message is cut to this many bytes
	MaxFinal   = 64 << 10
	KeepEvents = 200 // Summary keeps the first and the last KeepEvents events
	MaxFiles   = 1000
)

// Event is one normalised thing the CLI reported.
type Event struct {
	Kind    Kind
	Stream  Stream          // where the line came from
	Text    string          // assistant text, error message, result text, or the raw line for KindText (≤ MaxText)
	Tool    string          // tool name for tool calls and results
	Input   json.RawMessage // tool input; nil when larger than MaxInput
	IsError bool
}

// Usage is token usage as the CLI reports it. A count or cost the output
// never states is nil: unknown, which is not 0 (copilot's stream states no
// tokens at all, gemini's no cache writes, codex's and gemini's no cost).
type Usage struct {
	Model            string
	InputTokens      *int64
	OutputTokens     *int64
	CacheReadTokens  *int64
	CacheWriteTokens *int64
	CostUSD          *float64
}

// add adds n, when the output states it, to the count at dst: a sum of
// stated counts is known, a sum of none stays unknown.
func add[T int64 | float64](dst **T, n *T) {
	if n == nil {
		return
	}
	if *dst == nil {
		v := *n
		*dst = &v
		return
	}
	**dst += *n
}

// Failure is the fatal error the output shows.
type Failure struct {
	Class      drovertype.ErrorClass
	Status     int           // HTTP status when the output says (401, 429, 500…), else 0
	Message    string        // the CLI's own words (≤ MaxMessage)
	Retryable  bool          // trying again later may work
	RetryAfter time.Duration // set only when Retryable and the output says how long to wait
	ResetAt    time.Time     // set only when the output says when a quota resets
}

// String is the failure in one line, for logs.
func (f *Failure) String() string {
	if f.Status != 0 {
		return fmt.Sprintf("%s (%d): %s", f.Class, f.Status, f.Message)
	}
	return string(f.Class) + ": " + f.Message
}

// Summary is what a Parser learned from one run's output.
type Summary struct {
	Events    []Event // the first and the last KeepEvents events, in order
	Dropped   int     // events left out between them
	FinalText string  // the CLI's last answer (≤ MaxFinal)
	Usage     Usage
	Files     []string // files the CLI says it wrote — informational only, git decides what changed
	Failure   *Failure // nil when the output shows no fatal error
	Lines     int      // lines seen on both streams
	Unparsed  int      // stdout lines a structured format could not parse
}

// Stream says which output a line came from.
type Stream int

// The two streams of a process.
const (
	Stdout Stream = 1
	Stderr Stream = 2
)

func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	}
	return fmt.Sprintf("stream(%d)", int(s))
}

// Parser consumes a run's output line by line. It never fails: a line that
// does not parse is kept as a KindText event. Memory stays bounded whatever
// it is fed. A Parser is safe for concurrent use, so the stdout and stderr
// copiers of one process may feed it at once.
type Parser interface {
	// Line takes one line without its newline. The Parser does not keep line.
	Line(stream Stream, line []byte)
	// Summary reports what was seen so far, classified with the process's
	// exit code. It may be called more than once.
	Summary(exitCode int) *Summary
	// Verdict is what the output says about the run so far, while the CLI
	// still runs (doc.go, "While the CLI runs").
	Verdict() Verdict
}

// ProgressCounter is implemented by this package's parsers: what the
// run's output has shown so far, by kind, for telling a run that moves on
// from one that only retries (Progress).
type ProgressCounter interface {
	Progress() Progress
}

// Progress counts the events of a run's output so far.
type Progress struct {
	// Moved counts answers, tool calls and tools' results that are not
	// errors: the run moving on.
	Moved int
	// Relayed counts answers, tool calls and tools' results, errors
	// included: the words of the agent and of its tools, which the CLI
	// relays, as opposed to its own notices and errors.
	Relayed int
	// Judged says the format tells these apart at all: plain text
	// cannot, its lines are all alike, and counts none.
	Judged bool
}

var _ ProgressCounter = (*parser)(nil)

// Verdict is what the output says about a run that has not ended.
type Verdict struct {
	// Failure is the failure the output shows now: a fatal error, or the
	// CLI's latest retry notice when nothing has gone through since. Nil
	// while the run looks fine, and always for plain text, where the
	// agent's own words cannot be told from the CLI's.
	Failure *Failure
	// Retrying says the CLI is going to try again on its own: Failure
	// comes from a retry notice, or from an error the CLI retries after
	// (pi's failed message before its auto retry). False when the CLI
	// said it has given up.
	Retrying bool
}

// NewParser returns a Parser for f; an unknown f is read as Text.
func NewParser(f drovertype.OutputFormat) Parser {
	return newParser(specFor(f))
}
