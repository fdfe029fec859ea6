package transcript

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/drover-dev/drover/internal/drovertype"
)

// spec is what a Parser knows about one format.
type spec struct {
	format drovertype.OutputFormat
	// rules is the format's one classification table.
	rules []rule
	// decode handles one stdout line that starts with '{'; it returns
	// false when the line is not JSON. nil: the format is plain text.
	decode func(p *parser, line []byte) bool
	// final names the line the format promises at the end of every run
	// that was not cut short, "" when it promises none. Exit 0 without it
	// is RUNTIME_OUTPUT_MALFORMED (see doc.go).
	final string
}

// specs holds the spec of every structured format; anything else is text.
var specs = map[drovertype.OutputFormat]*spec{
	drovertype.FormatClaudeStreamJSON: claudeSpec,
	drovertype.FormatCodexJSON:        codexSpec,
	drovertype.FormatOpenCodeJSON:     openCodeSpec,
	drovertype.FormatGeminiStreamJSON: geminiSpec,
	drovertype.FormatPiJSON:           piSpec,
	drovertype.FormatCopilotJSON:      copilotSpec,
}

func specFor(f drovertype.OutputFormat) *spec {
	if s, ok := specs[f]; ok {
		return s
	}
	return textSpec
}

const (
	maxToolIDs = 1024 // tool call ids remembered to name results and files
	maxID      = 128  // bytes of a tool call id that count
	maxTool    = 256  // bytes of a tool name kept
)

type parser struct {
	mu   sync.Mutex
	spec *spec

	head    []Event
	tail    []Event // ring of the latest events once head is full
	next    int     // oldest slot of tail once it is full
	dropped int

	lines, unparsed int
	usage           Usage
	files           []string
	fileSet         map[string]struct{}
	final           string // FinalText when the format states it
	turn            []byte // assistant text since the last tool call (≤ MaxFinal)
	sawFinal        bool

	fatal     *signal // the structured error that ends the run; nil while things look fine
	retrying  bool    // fatal is an error the CLI retries after (pi), not its last word
	textFatal *signal // the first plain text line a non-hint row matched
	hint      *signal // the latest retry notice
	moved     bool    // the CLI made progress (an answer, a tool call) since hint
	progress  Progress
	lastErr   string // the latest non-empty stderr line

	tools map[string]string // tool call id → tool name
	paths map[string]string // tool call id → file the call writes

	// The clock and zone times of day in the output are read with
	// (NewParserWith); nil means time.Now and time.Local.
	now func() time.Time
	loc *time.Location

	// claude
	retryDelay time.Duration // the latest api_retry retry_delay_ms
	errCode    string        // the latest assistant "error"
	model      string        // from init, until the result names one
}

func newParser(s *spec) *parser {
	return &parser{spec: s}
}

func (p *parser) Line(s Stream, line []byte) {
	if len(line) > MaxLine {
		line = line[:MaxLine]
	}
	line = bytes.TrimRight(line, "\r")
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lines++
	if s == Stderr || p.spec.decode == nil {
		p.plain(s, line)
		return
	}
	t := bytes.TrimSpace(line)
	if len(t) == 0 {
		return
	}
	if t[0] == '{' && p.spec.decode(p, t) {
		return
	}
	p.unparsed++
	p.plain(Stdout, line)
}

// plain takes a line that is plain text: it is kept as a KindText event and
// read with the text rows of the format's table.
func (p *parser) plain(s Stream, line []byte) {
	if s != Stderr {
		s = Stdout
	}
	text := string(line)
	if strings.IndexByte(text, 0x1b) >= 0 {
		text = ansi.ReplaceAllString(text, "")
	}
	text = strings.TrimRight(text, " \t")
	if strings.TrimSpace(text) == "" {
		return
	}
	p.push(Event{Kind: KindText, Stream: s, Text: text})
	if s == Stderr {
		p.lastErr = clip(strings.TrimSpace(text), MaxMessage)
	}
	if p.spec.decode == nil && s == Stdout {
		p.addTail(text)
	}
	sig := p.resolve(&signal{from: fromText, text: strings.TrimSpace(text)})
	switch {
	case sig.rule == nil:
	case sig.rule.hint:
		p.hint, p.moved = sig, false
	case p.textFatal == nil:
		p.textFatal = sig
	}
}

// ansi matches the escape sequences kilo colours its stderr with
// (kilo/fail-401/stderr.txt: "\x1b[91m\x1b[1mError: \x1b[0m...").
var ansi = regexp.MustCompile(`\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])`)

// resolve fills in what a signal's words say and finds its row. Only the
// first MaxText bytes are read (an error message is short; this keeps a
// 1 MiB line from costing a regexp scan per row), and only MaxMessage kept.
func (p *parser) resolve(sig *signal) *signal {
	sig.text = clip(sig.text, MaxText)
	if sig.status == 0 {
		sig.status = statusFromText(sig.text)
	}
	sig.rule = lookup(p.spec.rules, sig)
	if sig.retryAfter == 0 {
		sig.retryAfter = retryAfterText(sig.text)
	}
	if sig.rule != nil {
		p.waitIn(sig) // a quota's wait or reset time, in the format's wordings (wait.go)
	}
	sig.text = clip(strings.TrimSpace(sig.text), MaxMessage)
	return sig
}

// setFatal records the structured error that ends the run. nil says the
// CLI got past its errors (a good answer, a clean final line): it clears
// the error and the retry notices before it.
func (p *parser) setFatal(sig *signal) {
	p.retrying = false
	if sig == nil {
		p.fatal, p.hint = nil, nil
		return
	}
	sig.from = fromJSON
	p.fatal = p.resolve(sig)
}

// setRetriedFatal records a structured error the CLI goes on to retry
// after (pi's failed message_end before auto_retry_start): Summary reads
// it like any fatal error, Verdict as a retry.
func (p *parser) setRetriedFatal(sig *signal) {
	p.setFatal(sig)
	p.retrying = true
}

// setHint records a structured retry notice.
func (p *parser) setHint(sig *signal) {
	sig.from = fromJSON
	p.hint, p.moved = p.resolve(sig), false
}

// Verdict implements Parser: the structured fatal error, else a fatal
// plain text line, else the latest retry notice unless the CLI made
// progress after it (a transient 429 the CLI got past is not a failure).
func (p *parser) Verdict() Verdict {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.spec.decode == nil:
		return Verdict{}
	case p.fatal != nil:
		return Verdict{Failure: classify(p.spec.rules, p.fatal), Retrying: p.retrying}
	case p.textFatal != nil:
		return Verdict{Failure: classify(p.spec.rules, p.textFatal)}
	case p.hint != nil && !p.moved:
		return Verdict{Failure: classify(p.spec.rules, p.hint), Retrying: true}
	}
	return Verdict{}
}

// Progress implements ProgressCounter.
func (p *parser) Progress() Progress {
	p.mu.Lock()
	defer p.mu.Unlock()
	pr := p.progress
	pr.Judged = p.spec.decode != nil
	return pr
}

func (p *parser) Summary(exitCode int) *Summary {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := &Summary{
		Events:   p.events(),
		Dropped:  p.dropped,
		Usage:    p.usage,
		Files:    append([]string(nil), p.files...),
		Lines:    p.lines,
		Unparsed: p.unparsed,
	}
	s.FinalText = p.final
	if s.FinalText == "" {
		t := p.turn
		if len(t) > MaxFinal {
			t = t[len(t)-MaxFinal:]
			for len(t) > 0 && !utf8.RuneStart(t[0]) {
				t = t[1:]
			}
		}
		s.FinalText = string(t)
	}
	s.Failure = p.failure(exitCode)
	return s
}

// failure decides, in this order: a structured fatal error; a fatal plain
// text line; success (exit 0 with the promised final line); the exit code
// (rows with an exit code, then the latest retry notice, then RUNTIME_ERROR).
func (p *parser) failure(exit int) *Failure {
	switch {
	case p.fatal != nil:
		return classify(p.spec.rules, p.fatal)
	case p.textFatal != nil:
		return classify(p.spec.rules, p.textFatal)
	}
	if exit == 0 {
		if p.spec.final == "" || p.sawFinal {
			return nil
		}
		if p.hint != nil {
			return classify(p.spec.rules, p.hint)
		}
		return &Failure{
			Class:     drovertype.ClassOutputMalformed,
			Message:   fmt.Sprintf("exit code 0 but no final %s line: the run ended before it finished", p.spec.final),
			Retryable: true,
		}
	}
	msg := fmt.Sprintf("exit code %d", exit)
	if p.lastErr != "" {
		msg += ": " + p.lastErr
	}
	sig := p.resolve(&signal{from: fromExit, exit: exit, text: msg})
	if sig.rule != nil && sig.rule.exit != 0 {
		return classify(p.spec.rules, sig)
	}
	if p.hint != nil {
		return classify(p.spec.rules, p.hint)
	}
	return classify(p.spec.rules, sig)
}

func (p *parser) push(e Event) {
	if e.Stream == 0 {
		e.Stream = Stdout
	}
	switch e.Kind {
	case KindAssistantText, KindToolCall, KindToolResult:
		// claude's synthetic answer to a failed call is an error, not progress.
		p.progress.Relayed++
		if !e.IsError {
			p.moved = true
			p.progress.Moved++
		}
	}
	e.Text = clip(e.Text, MaxText)
	e.Tool = clip(e.Tool, maxTool)
	if len(e.Input) > MaxInput {
		e.Input = nil
	}
	switch {
	case len(p.head) < KeepEvents:
		p.head = append(p.head, e)
	case len(p.tail) < KeepEvents:
		p.tail = append(p.tail, e)
	default:
		p.tail[p.next] = e
		p.next = (p.next + 1) % KeepEvents
		p.dropped++
	}
}

func (p *parser) events() []Event {
	out := make([]Event, 0, len(p.head)+len(p.tail))
	out = append(out, p.head...)
	out = append(out, p.tail[p.next:]...)
	return append(out, p.tail[:p.next]...)
}

// addTurn appends assistant text to the current turn, keeping its start.
func (p *parser) addTurn(s, sep string) {
	if len(p.turn) > 0 && sep != "" {
		s = sep + s
	}
	if room := MaxFinal - len(p.turn); room > 0 {
		p.turn = append(p.turn, clip(s, room)...)
	}
}

// addTail appends a plain stdout line to the turn, keeping its end: in text
// mode the answer comes last (docs/runtimes.md: claude's text mode prints
// only the final text on stdout, codex's only the final message).
func (p *parser) addTail(s string) {
	if len(p.turn) > 0 {
		p.turn = append(p.turn, '\n')
	}
	p.turn = append(p.turn, clip(s, MaxFinal)...)
	if len(p.turn) > 2*MaxFinal {
		p.turn = append(p.turn[:0], p.turn[len(p.turn)-MaxFinal:]...)
	}
}

func (p *parser) newTurn() { p.turn = p.turn[:0] }

func (p *parser) addFile(path string) {
	if path == "" || len(p.files) >= MaxFiles {
		return
	}
	path = clip(path, MaxText)
	if p.fileSet == nil {
		p.fileSet = make(map[string]struct{})
	}
	if _, ok := p.fileSet[path]; ok {
		return
	}
	p.fileSet[path] = struct{}{}
	p.files = append(p.files, path)
}

// remember maps a tool call id to a value (a tool name or a path), up to
// maxToolIDs ids, so memory stays bounded whatever ids the CLI invents.
func remember(m *map[string]string, id, v string) {
	if id == "" || v == "" {
		return
	}
	if *m == nil {
		*m = make(map[string]string)
	}
	if len(*m) >= maxToolIDs {
		return
	}
	(*m)[clip(id, maxID)] = clip(v, MaxText)
}

// recall is the value remember stored for id, "" if none.
func recall(m map[string]string, id string) string { return m[clip(id, maxID)] }

// decodeJSON unmarshals a line. A field of an unexpected type is skipped
// (the rest still decodes), so a CLI that changes one field's type does not
// lose the whole line; only a line that is not JSON fails.
func decodeJSON(b []byte, v any) bool {
	err := json.Unmarshal(b, v)
	var te *json.UnmarshalTypeError
	return err == nil || errors.As(err, &te)
}

// textOf reads content that is either a string or a list of blocks
// ({"type":"text","text":...}), as message contents are.
func textOf(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '"':
		var s string
		_ = json.Unmarshal(raw, &s)
		return s
	case '[':
		var blocks []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if !decodeJSON(raw, &blocks) {
			return ""
		}
		var b strings.Builder
		for _, bl := range blocks {
			if bl.Type == "text" && bl.Text != "" {
				if b.Len() > 0 {
					b.WriteByte('\n')
				}
				b.WriteString(clip(bl.Text, MaxFinal))
			}
			if b.Len() >= MaxFinal {
				break
			}
		}
		return b.String()
	}
	return ""
}

// stringField reads one string field of a JSON object, "" if absent.
func stringField(raw json.RawMessage, name string) string {
	var m map[string]json.RawMessage
	if !decodeJSON(raw, &m) {
		return ""
	}
	var s string
	if v, ok := m[name]; ok && json.Unmarshal(v, &s) == nil {
		return s
	}
	return ""
}

// clip cuts s to at most n bytes without splitting a UTF-8 sequence.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
