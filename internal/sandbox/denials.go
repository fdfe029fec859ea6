package sandbox

import (
	"bytes"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Bounds of what Denials keeps.
const (
	maxDenials    = 50
	maxDenialLine = 240
	maxLine       = 64 << 10
	maxEndpoints  = 16
)

// Denials reads a confined process's output for what the sandbox denied
// it. Landlock reports nothing itself (its audit log is the kernel's); a
// denied call fails with EACCES or EPERM, which programs print as
// "Permission denied", "Operation not permitted", EACCES or EPERM. A line
// saying so counts when it names a path the process may not write (read
// denials are writes' too: what it may not write includes all it may not
// read), or a TCP port it may not connect to. So does a line saying a
// connection failed ("Connection failed", "Cannot connect to API",
// "Connection error.") to a port the process may not connect to: named in
// the line, or, when the line names none and is the process's own word
// (Line), one of the endpoints it is configured to reach (SetEndpoints)
// that the sandbox refuses — most CLIs print no more than that when their
// model's port is refused (docs/security.md). Lines inside JSON strings (a
// CLI's tool results) are read too. It is best effort: a program may say
// nothing, or say it otherwise.
//
// Each target (a path, or a port) is counted, in all and since the
// process last made progress (Progress), so that a process stuck on what
// it may not reach can be told from one that tried once and moved on
// (Stuck). Memory is bounded whatever the process prints: maxDenials
// targets are kept, refusals of any other are only counted.
type Denials struct {
	c   *Confinement
	dir string // the process's working directory: relative paths are its

	mu        sync.Mutex
	now       func() time.Time
	partial   map[int][]byte // an unfinished line, per stream
	byWhat    map[string]*denial
	list      []*denial
	more      int        // refusals of targets beyond maxDenials
	endpoints []Endpoint // configured endpoints the sandbox refuses
	progress  time.Time  // when the process last made progress
}

// denial is one target the process was refused.
type denial struct {
	what   string // a path, or tcp/PORT
	addr   string // host:port it connected to, when known
	source string // where the process's configuration names it, when it does
	line   string // the first line that said so, printable and bounded
	times  int    // refusals in all
	streak int    // refusals since the last Progress
	since  time.Time
	last   time.Time
}

// Endpoint is a TCP endpoint a confined process is configured to reach.
type Endpoint struct {
	Addr   string // host:port
	Port   uint16
	Source string // where its configuration names it, for people
}

// Denials returns a reader of the output of a process confined by c and
// running in dir. Write and Line may be called from one goroutine per
// stream.
func (c *Confinement) Denials(dir string) *Denials {
	return &Denials{c: c, dir: dir, now: time.Now, partial: map[int][]byte{}, byWhat: map[string]*denial{}}
}

// SetClock sets the clock refusals are timed with (Stuck.Since); the
// default is time.Now.
func (d *Denials) SetClock(now func() time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.now = now
}

// SetEndpoints says which endpoints the process is configured to reach:
// a connection failure it reports in its own words without naming a port
// is put on those the confinement refuses (at most maxEndpoints).
func (d *Denials) SetEndpoints(eps []Endpoint) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.endpoints = nil
	for _, e := range eps {
		if !d.c.ConnectAllowed(e.Port) && len(d.endpoints) < maxEndpoints {
			d.endpoints = append(d.endpoints, e)
		}
	}
}

// Write reads a chunk of one output stream (any int naming it): of a
// process whose lines are not told apart, so a connection failure that
// names no port is put on no endpoint.
func (d *Denials) Write(stream int, p []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	buf := append(d.partial[stream], p...)
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			break
		}
		d.line(buf[:i], false)
		buf = buf[i+1:]
	}
	if len(buf) > maxLine {
		d.line(buf, false)
		buf = nil
	}
	d.partial[stream] = append(d.partial[stream][:0], buf...)
}

// Heard is what a line says of the sandbox.
type Heard int

// What Line heard.
const (
	// HeardNothing: no denial, no failed connection.
	HeardNothing Heard = iota
	// HeardFailure: a denial or a failed connection that is not the
	// sandbox's to refuse, or that names nothing.
	HeardFailure
	// HeardRefusal: the sandbox refused it something; it is counted.
	HeardRefusal
)

// Line reads one whole line and says what it heard. own says the line is
// the process's own word — an error or a notice of its, not an answer or
// a tool's result that it relays — so that a connection failure naming no
// port is put on the endpoints it is configured to reach that the sandbox
// refuses.
func (d *Denials) Line(line []byte, own bool) Heard {
	if len(line) > maxLine {
		line = line[:maxLine]
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.line(line, own)
}

// Progress says the process made progress: what it was refused until
// now no longer shows it stuck.
func (d *Denials) Progress() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.progress = d.now()
	for _, r := range d.list {
		r.streak = 0
	}
}

// Stuck is the target a process was refused most often since it last
// made progress.
type Stuck struct {
	// What is a path, or "tcp/PORT".
	What string
	// Addr is the host and port it tried to connect to, when known.
	Addr string
	// Source is where the process's configuration names the endpoint,
	// when it does.
	Source string
	// Line is the first line that said so.
	Line string
	// Times it was refused since it last made progress, the first of
	// them at Since, the latest at Last.
	Times       int
	Since, Last time.Time
	// After is when the process last made progress before Since; zero if
	// it never did. The times are when the lines were read: a process's
	// two streams are read apart, so a refusal read just after progress
	// may have been printed just before it.
	After time.Time
}

// Stuck returns the target refused most often since the last Progress
// (the earliest of equals), and false when nothing was refused since.
func (d *Denials) Stuck() (Stuck, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var top *denial
	for _, r := range d.list {
		if r.streak > 0 && (top == nil || r.streak > top.streak || r.streak == top.streak && r.since.Before(top.since)) {
			top = r
		}
	}
	if top == nil {
		return Stuck{}, false
	}
	return Stuck{What: top.what, Addr: top.addr, Source: top.source, Line: top.line, Times: top.streak, Since: top.since, Last: top.last,
		After: d.progress}, true
}

// List returns the denials found, each "WHAT: LINE" where WHAT is a path
// or tcp/PORT, in the order first seen, with how often when more than
// once; a last entry counts the refusals of targets left out. It reads
// what is left unfinished on each stream first.
func (d *Denials) List() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	for s, buf := range d.partial {
		d.line(buf, false)
		delete(d.partial, s)
	}
	var out []string
	for _, r := range d.list {
		e := r.what + ": " + r.line
		if r.times > 1 {
			e += fmt.Sprintf(" (refused %d times)", r.times)
		}
		out = append(out, e)
	}
	if d.more > 0 {
		out = append(out, fmt.Sprintf("… and %d more refusals of other targets", d.more))
	}
	return out
}

var (
	deniedWords = []string{"permission denied", "operation not permitted", "eacces", "eperm"}
	// A failed connection, in the words of the CLIs and their libraries:
	// codex "Reconnecting... waiting for network (Connection failed: error
	// sending request)", pi "Connection error.", opencode and kilo "Cannot
	// connect to API" (testdata/transcripts/*/sandbox-denied), curl
	// "Failed to connect to … port N", node "fetch failed".
	connectWords = []string{"connection failed", "connection error", "cannot connect", "can't connect", "could not connect",
		"couldn't connect", "failed to connect", "unable to connect", "waiting for network", "fetch failed"}
	// Paths: quoted, or bare after a space, colon, parenthesis, comma,
	// equals sign or quote; absolute, or relative with a slash. Quotes are
	// normalised first (quoteless).
	quoted = regexp.MustCompile("'([^']+)'|\"([^\"]+)\"|`([^`]+)`")
	bare   = regexp.MustCompile(`(?:^|[\s:(=,'"` + "`" + `])((?:/|\.{1,2}/)[^\s:'"` + "`" + `,()\\]*)`)
	// quoteless turns the quotes programs and JSON use into plain ones:
	// \" of a JSON string, and GNU's ‘’ (or their \u escapes).
	quoteless  = strings.NewReplacer(`\"`, `"`, "‘", "'", "’", "'", `\u2018`, "'", `\u2019`, "'")
	verbObject = regexp.MustCompile(`(?i)cannot (?:create|open|touch|remove|access|stat|write)(?: directory| regular file)? '?([^\s:']+)'?`)
	devTCP     = regexp.MustCompile(`/dev/tcp/([^/\s]+)/(\d{1,5})\b`)
	// A port, in a lowercased line: "port N" (curl: "to HOST port N"),
	// HOST:N (an IPv4 address, [IPv6], localhost), or a URL's. Three
	// patterns, each tried only when the line could hold it: one would
	// cost tens of microseconds a line.
	portWord = regexp.MustCompile(`(?:(\d{1,3}(?:\.\d{1,3}){3}|localhost|[a-z0-9-]+(?:\.[a-z0-9-]+)+) )?\bport (\d{1,5})\b`)
	hostPort = regexp.MustCompile(`(\d{1,3}(?:\.\d{1,3}){3}|\[[0-9a-f:.]+\]|localhost):(\d{1,5})\b`)
	urlPort  = regexp.MustCompile(`\b[a-z][a-z0-9+.-]*://(?:[^/\s"'@]*@)?(\[[0-9a-f:.]+\]|[a-z0-9.-]+):(\d{1,5})\b`)
)

// line reads one line, or each line a JSON string in it holds, and says
// what it heard.
func (d *Denials) line(b []byte, own bool) Heard {
	lower := bytes.ToLower(b)
	if !containsAny(lower, deniedWords) && !containsAny(lower, connectWords) {
		return HeardNothing
	}
	heard := HeardFailure
	for _, l := range strings.Split(string(b), `\n`) {
		if d.judge(strings.TrimSpace(l), own) {
			heard = HeardRefusal
		}
	}
	return heard
}

func containsAny(b []byte, words []string) bool {
	for _, w := range words {
		if bytes.Contains(b, []byte(w)) {
			return true
		}
	}
	return false
}

// judge records l if it says a path the process may not write, or a port
// it may not connect to, was denied, or that a connection to such a port
// failed.
func (d *Denials) judge(l string, own bool) bool {
	low := strings.ToLower(l)
	denied := false
	for _, w := range deniedWords {
		denied = denied || strings.Contains(low, w)
	}
	if !denied {
		return d.failedConnect(l, low, own)
	}
	// bash's /dev/tcp/HOST/PORT is a connection, not a file.
	if m := devTCP.FindStringSubmatch(l); m != nil {
		if n, err := strconv.Atoi(m[2]); err == nil && n > 0 && n < 1<<16 && !d.c.ConnectAllowed(uint16(n)) {
			d.add(fmt.Sprintf("tcp/%d", n), net.JoinHostPort(m[1], m[2]), "", l)
			return true
		}
		return false
	}
	// The path a program names last is the one it was refused: the first
	// is often the program itself ("/bin/sh: 2: cannot create x: …").
	paths := d.paths(l)
	for i := len(paths) - 1; i >= 0; i-- {
		if !d.c.Writable(paths[i]) {
			d.add(paths[i], "", "", l)
			return true
		}
	}
	return d.refusedPort(l, low)
}

// namedPort is a port a line names, and the host before it if any.
type namedPort struct {
	at         int
	host, port string
}

// namedPorts returns the ports low (a lowercased line) names, in order.
func namedPorts(low string) []namedPort {
	var out []namedPort
	add := func(re *regexp.Regexp) {
		for _, m := range re.FindAllStringSubmatchIndex(low, -1) {
			p := namedPort{at: m[0], port: low[m[4]:m[5]]}
			if m[2] >= 0 {
				p.host = low[m[2]:m[3]]
			}
			out = append(out, p)
		}
	}
	if strings.Contains(low, "port ") {
		add(portWord)
	}
	if strings.Contains(low, "://") {
		add(urlPort)
	}
	if strings.Contains(low, "localhost:") || strings.Contains(low, "]:") || digitColonDigit(low) {
		add(hostPort)
	}
	slices.SortStableFunc(out, func(a, b namedPort) int { return a.at - b.at })
	return out
}

// digitColonDigit reports whether s has a digit, a colon and a digit in a
// row: what an address and its port look like.
func digitColonDigit(s string) bool {
	for i := 1; i+1 < len(s); i++ {
		if s[i] == ':' && s[i-1] >= '0' && s[i-1] <= '9' && s[i+1] >= '0' && s[i+1] <= '9' {
			return true
		}
	}
	return false
}

// refusedPort records the first port l names that the process may not
// connect to.
func (d *Denials) refusedPort(l, low string) bool {
	for _, m := range namedPorts(low) {
		n, err := strconv.Atoi(m.port)
		if err != nil || n <= 0 || n >= 1<<16 || d.c.ConnectAllowed(uint16(n)) {
			continue
		}
		addr := ""
		if m.host != "" {
			addr = net.JoinHostPort(strings.Trim(m.host, "[]"), m.port)
		}
		d.add(fmt.Sprintf("tcp/%d", n), addr, "", l)
		return true
	}
	return false
}

// failedConnect records a connection failure to a port the process may
// not connect to: the one the line names, or, for a line of the process's
// own that names none, the refused endpoints it is configured to reach.
func (d *Denials) failedConnect(l, low string, own bool) bool {
	found := false
	for _, w := range connectWords {
		found = found || strings.Contains(low, w)
	}
	if !found {
		return false
	}
	if ports := namedPorts(low); len(ports) > 0 {
		return d.refusedPort(l, low)
	}
	if !own || len(d.endpoints) == 0 {
		return false
	}
	for _, e := range d.endpoints {
		d.add(fmt.Sprintf("tcp/%d", e.Port), e.Addr, e.Source, l)
	}
	return true
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

// add counts a refusal of what; the first of each target keeps its line.
func (d *Denials) add(what, addr, source, l string) {
	// What a process printed reaches a terminal: no control characters.
	what = printable(clip(what, maxDenialLine))
	r := d.byWhat[what]
	if r == nil {
		if len(d.list) >= maxDenials {
			d.more++
			return
		}
		r = &denial{what: what, line: printable(clip(l, maxDenialLine))}
		d.byWhat[what] = r
		d.list = append(d.list, r)
	}
	if r.addr == "" && addr != "" {
		r.addr = printable(clip(addr, maxDenialLine))
	}
	if r.source == "" {
		r.source = source
	}
	r.times++
	r.last = d.now()
	if r.streak == 0 {
		r.since = r.last
	}
	r.streak++
}

// clip cuts s to n bytes, marking the cut.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
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
