package main

// Replay of recorded runs, for persona mode. The recordings live in
// testdata/transcripts/<cli>/<case>/ as stdout.txt, stderr.txt and
// meta.json (argv, exit code, whether the run created its file).

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Every recorded run was asked to "create hello.txt containing hi", and
// the successful ones did.
const (
	recordedFile    = "hello.txt"
	recordedContent = "hi\n"
)

// recording is one recorded run, ready to replay in the current directory.
type recording struct {
	cli            string
	stdout, stderr string // placeholders already replaced
	exit           int
	createsFile    bool
	seconds        float64       // the recorded run's wall time
	pace           time.Duration // between lines, from DEMO_AGENT_PACE
	scale          float64       // DEMO_AGENT_PACE=recorded[/N]: the recorded pace, N times faster; 0 otherwise
}

// transcriptsDir finds the recordings: $DEMO_AGENT_TRANSCRIPTS, else a
// testdata/transcripts directory beside the binary or the current
// directory, or in one of their parents.
func transcriptsDir() (string, error) {
	if dir := os.Getenv("DEMO_AGENT_TRANSCRIPTS"); dir != "" {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return "", fmt.Errorf("DEMO_AGENT_TRANSCRIPTS=%s is not a directory", dir)
		}
		return filepath.Abs(dir)
	}
	var starts []string
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	if cwd, err := os.Getwd(); err == nil {
		starts = append(starts, cwd)
	}
	for _, start := range starts {
		if dir, ok := findUp(start, filepath.Join("testdata", "transcripts")); ok {
			return dir, nil
		}
	}
	return "", fmt.Errorf("no recorded transcripts: set DEMO_AGENT_TRANSCRIPTS to the testdata/transcripts directory "+
		"(none found beside the binary or upward from %s)", strings.Join(starts, " or "))
}

// findUp looks for rel in dir and then in each of its parents.
func findUp(dir, rel string) (string, bool) {
	for {
		if _, err := os.Stat(filepath.Join(dir, rel)); err == nil {
			return filepath.Join(dir, rel), true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// loadRecording reads the recording of cli's run named name, with its
// placeholders pointing into cwd.
func loadRecording(transcripts, cli, name, cwd string) (*recording, error) {
	dir := filepath.Join(transcripts, cli, name)
	b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if errors.Is(err, os.ErrNotExist) {
		var have []string
		entries, _ := os.ReadDir(filepath.Join(transcripts, cli))
		for _, e := range entries {
			have = append(have, e.Name())
		}
		return nil, fmt.Errorf("@case %s: no recording %s (have: %s)", name, dir, strings.Join(have, ", "))
	}
	if err != nil {
		return nil, err
	}
	var meta struct {
		Exit    int     `json:"exit"`
		File    string  `json:"file"` // "created" or "missing"
		Seconds float64 `json:"seconds"`
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "meta.json"), err)
	}
	rec := &recording{cli: cli, exit: meta.Exit, createsFile: meta.File == "created", seconds: meta.Seconds}
	if pace := os.Getenv("DEMO_AGENT_PACE"); pace != "" {
		if rec.pace, rec.scale, err = parsePace(pace); err != nil {
			return nil, err
		}
	}
	for file, text := range map[string]*string{"stdout.txt": &rec.stdout, "stderr.txt": &rec.stderr} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			return nil, err
		}
		*text = substitute(string(b), cwd, os.TempDir())
	}
	return rec, nil
}

// substitute fills in the placeholders of the recordings: $RUN/repo was
// the CLI's working directory (now cwd), $RUN the run directory holding
// it (now cwd's parent) and $TMPDIR the temp directory. In JSON lines the
// paths are JSON-escaped.
func substitute(text, cwd, tmp string) string {
	pairs := func(esc func(string) string) *strings.Replacer {
		return strings.NewReplacer("$RUN/repo", esc(cwd), "$RUN", esc(filepath.Dir(cwd)), "$TMPDIR", esc(tmp))
	}
	plain, inJSON := pairs(func(s string) string { return s }), pairs(jsonEscape)
	var b strings.Builder
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, "{") {
			inJSON.WriteString(&b, line)
		} else {
			plain.WriteString(&b, line)
		}
	}
	return b.String()
}

// jsonEscape is s as it appears inside a JSON string.
func jsonEscape(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(b.String()), `"`), `"`)
}

// replay plays the recording (the @case directive): stderr, then stdout,
// a line per write, at DEMO_AGENT_PACE (timing.go for "recorded"); then
// it creates the file the run created, and makes the recorded exit code
// the run's.
func (a *agent) replay() error {
	lines, waits := timeline(a.rec.cli, a.rec, a.rec.scale)
	for i, l := range lines {
		switch {
		case a.rec.scale > 0:
			time.Sleep(waits[i])
		case i > 0 && a.rec.pace > 0:
			time.Sleep(a.rec.pace)
		}
		w := a.out.w
		if l.stderr {
			w = a.stderr
		}
		_, _ = io.WriteString(w, l.text)
	}
	if a.rec.createsFile {
		if err := a.root.WriteFile(recordedFile, []byte(recordedContent), 0o644); err != nil {
			return err
		}
	}
	a.exitCode = a.rec.exit
	return nil
}
