package sandbox

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Bounds of what Denials keeps.
const (
	maxDenials    = 50
	maxDenialLine = 240
	maxLine       = 64 << 10
)

// Denials reads a confined process's output for what the sandbox denied
// it. Landlock reports nothing itself (its audit log is the kernel's); a
// denied call fails with EACCES or EPERM, which programs print as
// "Permission denied", "Operation not permitted", EACCES or EPERM. A line
// saying so counts when it names a path the process may not write (read
// denials are writes' too: what it may not write includes all it may not
// read), or a TCP port it may not connect to. Lines inside JSON strings
// (a CLI's tool results) are read too. It is best effort: a program may
// say nothing, or say it otherwise.
type Denials struct {
	c   *Confinement
	dir string // the process's working directory: relative paths are its

	mu      sync.Mutex
	partial map[int][]byte // an unfinished line, per stream
	seen    map[string]bool
	list    []string
	more    int // denials beyond maxDenials
}

// Denials returns a reader of the output of a process confined by c and
// running in dir. Write may be called from one goroutine per stream.
func (c *Confinement) Denials(dir string) *Denials {
	return &Denials{c: c, dir: dir, partial: map[int][]byte{}, seen: map[string]bool{}}
}

// Write reads a chunk of one output stream (any int naming it).
func (d *Denials) Write(stream int, p []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	buf := append(d.partial[stream], p...)
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			break
		}
		d.line(buf[:i])
		buf = buf[i+1:]
	}
	if len(buf) > maxLine {
		d.line(buf)
		buf = nil
	}
	d.partial[stream] = append(d.partial[stream][:0], buf...)
}

// List returns the denials found, each "WHAT: LINE" where WHAT is a path
// or tcp/PORT, in the order first seen; a last entry counts those left out.
// It reads what is left unfinished on each stream first.
func (d *Denials) List() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	for s, buf := range d.partial {
		d.line(buf)
		delete(d.partial, s)
	}
	out := append([]string(nil), d.list...)
	if d.more > 0 {
		out = append(out, fmt.Sprintf("… and %d more", d.more))
	}
	return out
}

var (
	deniedWords = []string{"permission denied", "operation not permitted", "eacces", "eperm"}
	// Paths: quoted, or bare after a space, colon, parenthesis, comma,
	// equals sign or quote; absolute, or relative with a slash. Quotes are
	// normalised first (quoteless).
	quoted = regexp.MustCompile("'([^']+)'|\"([^\"]+)\"|`([^`]+)`")
	bare   = regexp.MustCompile(`(?:^|[\s:(=,'"` + "`" + `])((?:/|\.{1,2}/)[^\s:'"` + "`" + `,()\\]*)`)
	// quoteless turns the quotes programs and JSON use into plain ones:
	// \" of a JSON string, and GNU's ‘’ (or their \u escapes).
	quoteless  = strings.NewReplacer(`\"`, `"`, "‘", "'", "’", "'", `\u2018`, "'", `\u2019`, "'")
	verbObject = regexp.MustCompile(`(?i)cannot (?:create|open|touch|remove|access|stat|write)(?: directory| regular file)? '?([^\s:']+)'?`)
	devTCP     = regexp.MustCompile(`/dev/tcp/[^/\s]+/(\d{1,5})\b`)
	port       = regexp.MustCompile(`(?i)\bport (\d{1,5})\b|(?:\d{1,3}(?:\.\d{1,3}){3}|\]|localhost):(\d{1,5})\b`)
)

// line reads one line, or each line a JSON string in it holds.
func (d *Denials) line(b []byte) {
	lower := bytes.ToLower(b)
	hit := false
	for _, w := range deniedWords {
		if bytes.Contains(lower, []byte(w)) {
			hit = true
			break
		}
	}
	if !hit {
		return
	}
	for _, l := range strings.Split(string(b), `\n`) {
		d.judge(strings.TrimSpace(l))
	}
}

// judge records l if it says a path the process may not write, or a port
// it may not connect to, was denied.
func (d *Denials) judge(l string) {
	low := strings.ToLower(l)
	found := false
	for _, w := range deniedWords {
		found = found || strings.Contains(low, w)
	}
	if !found {
		return
	}
	// bash's /dev/tcp/HOST/PORT is a connection, not a file.
	if m := devTCP.FindStringSubmatch(l); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil && n > 0 && n < 1<<16 && !d.c.ConnectAllowed(uint16(n)) {
			d.add(fmt.Sprintf("tcp/%d", n), l)
		}
		return
	}
	// The path a program names last is the one it was refused: the first
	// is often the program itself ("/bin/sh: 2: cannot create x: …").
	paths := d.paths(l)
	for i := len(paths) - 1; i >= 0; i-- {
		if !d.c.Writable(paths[i]) {
			d.add(paths[i], l)
			return
		}
	}
	for _, m := range port.FindAllStringSubmatch(l, -1) {
		n, err := strconv.Atoi(m[1] + m[2])
		if err == nil && n > 0 && n < 1<<16 && !d.c.ConnectAllowed(uint16(n)) {
			d.add(fmt.Sprintf("tcp/%d", n), l)
			return
		}
	}
}

// paths returns the paths l names, absolute.
func (d *Denials) paths(l string) []string {
	l = quoteless.Replace(l)
	var cands []string
	for _, m := range quoted.FindAllStringSubmatch(l, -1) {
		cands = append(cands, m[1]+m[2]+m[3])
	}
	for _, m := range bare.FindAllStringSubmatchIndex(l, -1) {
		// A program naming itself first ("/bin/sh: 2: …") is not a path
		// it was refused.
		if m[2] == 0 && strings.HasPrefix(l[m[3]:], ":") {
			continue
		}
		cands = append(cands, l[m[2]:m[3]])
	}
	// A name without a slash after what a program could not do to it
	// ("cannot create out.txt") is relative to the working directory.
	for _, m := range verbObject.FindAllStringSubmatch(l, -1) {
		if !strings.Contains(m[1], "/") {
			cands = append(cands, "./"+m[1])
		}
	}
	var out []string
	for _, c := range cands {
		c = strings.TrimRight(c, ".;")
		switch {
		case strings.HasPrefix(c, "/"):
		case strings.HasPrefix(c, "./"), strings.HasPrefix(c, "../"), strings.Contains(c, "/") && !strings.Contains(c, " ") && !strings.Contains(c, "://"):
			if d.dir == "" {
				continue
			}
			c = filepath.Join(d.dir, c)
		default:
			continue
		}
		out = append(out, filepath.Clean(c))
	}
	return out
}

func (d *Denials) add(what, l string) {
	// What a process printed reaches a terminal: no control characters.
	what, l = printable(what), printable(l)
	if d.seen[what] {
		return
	}
	d.seen[what] = true
	if len(d.list) >= maxDenials {
		d.more++
		return
	}
	if len(l) > maxDenialLine {
		l = l[:maxDenialLine] + "…"
	}
	d.list = append(d.list, what+": "+l)
}

// printable replaces control characters and invalid UTF-8.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == utf8.RuneError {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
}
