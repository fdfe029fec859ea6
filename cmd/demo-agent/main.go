// Command demo-agent is Drover's bundled demo coding agent: a stand-in for a
// headless coding-agent CLI (Claude Code and friends) that needs no API key
// and no network. `make demo` runs it as the agent, and tests use it as a
// fake CLI whose behaviour a prompt can script.
//
// It reads a prompt (stdin, --prompt-file, -p or the last argument), runs the
// prompt's @directives in its working directory (the worktree) and reports
// what it did on stdout as Claude Code `--output-format stream-json` lines.
// A prompt without directives makes it write a note to DEMO.md, so every run
// changes something. See docs/demo-agent.md for the directives.
//
// Invoked as claude, codex, opencode, kilo, gemini, pi or copilot (a symlink)
// or with --persona NAME, it impersonates that CLI instead: its argv, and its
// output replayed from a real recorded run (persona.go, replay.go).
//
// With --review it plays a validator instead: it reads a review prompt
// (task, diff, check output) and answers with a VERDICT line, running no
// directives (review.go).
package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"
)

const version = "1.0.0"

func main() {
	os.Exit(run(os.Args[0], os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is the whole program; it returns the exit code.
func run(argv0 string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if name, rest, ok := personaArgs(argv0, args); ok {
		return runPersona(name, rest, stdin, stdout, stderr)
	}
	fl := flag.NewFlagSet("demo-agent", flag.ContinueOnError)
	fl.SetOutput(stderr)
	text := fl.String("p", "", "the prompt `TEXT`")
	file := fl.String("prompt-file", "", "read the prompt from `FILE`")
	showVersion := fl.Bool("version", false, "print the version and exit")
	model := fl.String("model", "demo", "model `NAME` reported in the init line")
	format := fl.String("output-format", "stream-json", "output `FORMAT`: stream-json; with --review, text (the default there) or stream-json")
	fl.Bool("verbose", false, "accepted for Claude Code compatibility; ignored")
	review := fl.Bool("review", false, "act as a validator: answer the prompt's diff with VERDICT: PASS or FAIL; run no directives")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: demo-agent [flags] [PROMPT]\n\nThe prompt comes from -p, --prompt-file, the last argument, or else stdin.\n\nFlags:")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if *showVersion {
		fmt.Fprintln(stdout, "demo-agent "+version)
		return exitOK
	}
	if *format != "stream-json" && (*format != "text" || !*review) {
		fmt.Fprintf(stderr, "demo-agent: --output-format %q is not supported (only stream-json, or text with --review)\n", *format)
		return exitUsage
	}
	prompt, err := readPrompt(fl, *text, *file, stdin)
	if err != nil {
		fmt.Fprintln(stderr, "demo-agent:", err)
		return exitUsage
	}
	cwd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(stderr, "demo-agent:", err)
		return exitFailed
	}
	out := &stream{w: stdout, session: newSessionID(), start: time.Now()}
	if *review {
		// A validator's answer is plain text, unless stream-json is asked
		// for by name (a runtime whose output is read as claude-stream-json).
		named := false
		fl.Visit(func(f *flag.Flag) { named = named || f.Name == "output-format" })
		return reviewRun(out, cwd, prompt, *model, named && *format == "stream-json")
	}
	// Every file operation goes through the root, so nothing (not even a
	// symlink planted in the worktree) lets the agent write outside it.
	root, err := os.OpenRoot(cwd)
	if err != nil {
		fmt.Fprintln(stderr, "demo-agent:", err)
		return exitFailed
	}
	defer root.Close()

	a := &agent{
		root:    root,
		cwd:     cwd,
		stderr:  stderr,
		out:     out,
		attempt: attemptNumber(os.Getenv("DROVER_ATTEMPT_ID")),
	}
	return a.run(prompt, *model)
}

// readPrompt takes the prompt from exactly one place. Several at once is a
// mistake worth reporting rather than guessing which one was meant.
func readPrompt(fl *flag.FlagSet, text, file string, stdin io.Reader) (string, error) {
	set := map[string]bool{}
	fl.Visit(func(f *flag.Flag) { set[f.Name] = true })
	n := 0
	for _, given := range []bool{set["p"], set["prompt-file"], fl.NArg() > 0} {
		if given {
			n++
		}
	}
	if n > 1 {
		return "", errors.New("give the prompt one way only: -p TEXT, --prompt-file FILE, an argument, or stdin")
	}
	switch {
	case set["prompt-file"]:
		b, err := os.ReadFile(file)
		return string(b), err
	case set["p"]:
		return text, nil
	case fl.NArg() > 0:
		return fl.Arg(fl.NArg() - 1), nil
	}
	b, err := io.ReadAll(stdin)
	if err != nil {
		return "", fmt.Errorf("reading the prompt from stdin: %w", err)
	}
	return string(b), nil
}

// agent carries out one prompt.
type agent struct {
	root    *os.Root
	cwd     string
	stderr  io.Writer
	out     *stream
	actions []string // short past-tense notes for the summary
	attempt int      // the attempt number: directives for other attempts are skipped
	prompt  string   // the whole prompt, for @prompt

	// Persona mode only: the recording @case replays, and the exit code
	// once every directive has run (the recording's, after a replay).
	rec      *recording
	exitCode int
	model    *modelCall // what @call-model calls: the codex and pi personas only
}

func (a *agent) did(action string) { a.actions = append(a.actions, action) }

func (a *agent) run(prompt, model string) int {
	a.out.emit(initEvent{
		Type: "system", Subtype: "init", CWD: a.cwd, SessionID: a.out.session,
		Model: model, Tools: []string{"Write", "Edit", "Bash"},
	})
	a.out.inputBytes = len(prompt)
	a.prompt = prompt
	ds, err := parse(prompt)
	if err != nil {
		return a.finish(exitUsage, err.Error())
	}
	for _, d := range ds {
		if d.name == "case" || d.name == "call-model" {
			return a.finish(exitUsage, fmt.Sprintf("line %d: @%s works only in persona mode (see --persona)", d.line, d.name))
		}
	}
	// Only a prompt without any directive gets the DEMO.md note: a scripted
	// prompt whose directives are all for other attempts changes nothing.
	if len(ds) == 0 {
		if err := a.demoNote(prompt); err != nil {
			return a.finish(exitFailed, "writing DEMO.md: "+err.Error())
		}
	}
	return a.finish(a.perform(forAttempt(ds, a.attempt, time.Now())))
}

// perform runs the directives in order. It returns the exit code and, for
// a failure, the message to report on stderr.
func (a *agent) perform(ds []directive) (code int, msg string) {
	for _, d := range ds {
		err := a.execute(d)
		if err == nil {
			continue
		}
		if ee, ok := errors.AsType[*exitError](err); ok {
			if d.name == "exit" {
				// A scripted exit is not a failure to explain on stderr.
				return ee.code, ""
			}
			return ee.code, ee.msg
		}
		return exitFailed, fmt.Sprintf("line %d: @%s: %v", d.line, d.name, err)
	}
	return a.exitCode, ""
}

// demoNote is what the agent does with a prompt that has no directives: add
// the prompt's first line to DEMO.md, creating it if needed. Appending means
// a run always changes the tree, even when the same prompt runs twice.
func (a *agent) demoNote(prompt string) error {
	entry := "- " + firstLine(prompt) + "\n"
	if _, err := a.root.Stat("DEMO.md"); errors.Is(err, fs.ErrNotExist) {
		return a.writeFile("DEMO.md", "# DEMO\n\n"+
			"Written by demo-agent, Drover's bundled demo coding agent.\n"+
			"Each run without directives adds the first line of its prompt:\n\n"+entry, false)
	}
	return a.writeFile("DEMO.md", entry, true)
}

func firstLine(prompt string) string {
	for line := range strings.Lines(prompt) {
		if line = strings.TrimSpace(line); line != "" {
			if r := []rune(line); len(r) > 200 {
				line = string(r[:200]) + "…"
			}
			return line
		}
	}
	return "(empty prompt)"
}

// finish writes the closing assistant text and result lines and returns the
// exit code. msg, if any, is the error to report on stderr.
func (a *agent) finish(code int, msg string) int {
	done := "nothing changed"
	if len(a.actions) > 0 {
		done = strings.Join(a.actions, "; ")
	}
	summary := "Done: " + done + "."
	switch {
	case msg != "":
		fmt.Fprintln(a.stderr, "demo-agent:", msg)
		summary = "Failed: " + msg
	case code != exitOK:
		summary = fmt.Sprintf("Exiting with code %d as the prompt asked (%s).", code, done)
	}
	a.out.text(summary)
	a.out.result(code != exitOK, summary)
	return code
}

// stream writes Claude Code stream-json lines. Each line goes out in a
// single unbuffered Write, so lines reach a supervisor as they happen and
// nothing is lost when the process exits (or is killed) right after.
// A quiet stream (persona mode, whose stdout is the replayed recording)
// drops the JSON lines and keeps only raw output (@stdout, @flood).
type stream struct {
	w          io.Writer
	quiet      bool
	session    string
	start      time.Time
	nextID     int
	turns      int
	inputBytes int
	outBytes   int
}

func (s *stream) emit(v any) {
	if s.quiet {
		return
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // only our own plain structs are encoded
	}
	s.raw(b.Bytes())
}

func (s *stream) raw(p []byte) { _, _ = s.w.Write(p) }

func (s *stream) assistant(content any) {
	s.turns++
	ev := messageEvent{Type: "assistant", Message: message{Role: "assistant", Content: []any{content}}, SessionID: s.session}
	b, _ := json.Marshal(content)
	s.outBytes += len(b)
	s.emit(ev)
}

// toolUse reports a tool call and returns its id for the matching result.
func (s *stream) toolUse(name string, input any) string {
	s.nextID++
	id := fmt.Sprintf("toolu_%d", s.nextID)
	s.assistant(toolUseBlock{Type: "tool_use", ID: id, Name: name, Input: input})
	return id
}

func (s *stream) toolResult(id, content string) {
	s.emit(messageEvent{Type: "user", SessionID: s.session, Message: message{Role: "user",
		Content: []any{toolResultBlock{Type: "tool_result", ToolUseID: id, Content: content}}}})
}

func (s *stream) text(t string) { s.assistant(textBlock{Type: "text", Text: t}) }

func (s *stream) result(isError bool, summary string) {
	ev := resultEvent{
		Type: "result", Subtype: "success", IsError: isError,
		DurationMS: time.Since(s.start).Milliseconds(), NumTurns: s.turns,
		Result: summary, SessionID: s.session,
		Usage: usage{InputTokens: tokens(s.inputBytes), OutputTokens: tokens(s.outBytes)},
	}
	if isError {
		ev.Subtype = "error_during_execution"
	}
	s.emit(ev)
}

// tokens is a fake but plausible token count for n bytes of text.
func tokens(n int) int { return (n + 3) / 4 }

func newSessionID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])  // never fails on supported platforms
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
}

// The stream-json shapes. Field order follows Claude Code's output, "type"
// first, which is why these are structs and not maps.
type (
	initEvent struct {
		Type      string   `json:"type"`
		Subtype   string   `json:"subtype"`
		CWD       string   `json:"cwd"`
		SessionID string   `json:"session_id"`
		Model     string   `json:"model"`
		Tools     []string `json:"tools"`
	}
	messageEvent struct {
		Type      string  `json:"type"`
		Message   message `json:"message"`
		SessionID string  `json:"session_id"`
	}
	message struct {
		Role    string `json:"role"`
		Content []any  `json:"content"`
	}
	toolUseBlock struct {
		Type  string `json:"type"`
		ID    string `json:"id"`
		Name  string `json:"name"`
		Input any    `json:"input"`
	}
	toolResultBlock struct {
		Type      string `json:"type"`
		ToolUseID string `json:"tool_use_id"`
		Content   string `json:"content"`
	}
	textBlock struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	writeInput struct {
		FilePath string `json:"file_path"`
		Content  string `json:"content"`
	}
	bashInput struct {
		Command     string `json:"command"`
		Description string `json:"description"`
	}
	resultEvent struct {
		Type         string  `json:"type"`
		Subtype      string  `json:"subtype"`
		IsError      bool    `json:"is_error"`
		DurationMS   int64   `json:"duration_ms"`
		NumTurns     int     `json:"num_turns"`
		Result       string  `json:"result"`
		SessionID    string  `json:"session_id"`
		TotalCostUSD float64 `json:"total_cost_usd"`
		Usage        usage   `json:"usage"`
	}
	usage struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	}
)
