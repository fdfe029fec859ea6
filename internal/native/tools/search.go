package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"strings"
	"syscall"

	"github.com/bmatcuk/doublestar/v4"
)

// errStop ends a walk early.
var errStop = errors.New("tools: stop walking")

// dirOf resolves a directory argument ("" is the worktree) for reading.
func (s *Set) dirOf(tool, p string) (string, fs.FileInfo, *Outcome) {
	if p == "" {
		p = "."
	}
	rel, o := s.resolveRead(tool, p)
	if o != nil {
		return "", nil, o
	}
	st, err := s.root.Stat(rel)
	if err != nil {
		if isEscape(err) {
			o := s.refuse(tool, p, ReasonSymlinkOut)
			return "", nil, &o
		}
		if errors.Is(err, fs.ErrNotExist) {
			o := failf("%s does not exist (paths are relative to the worktree %s)", p, s.dir)
			return "", nil, &o
		}
		o := failf("cannot stat %s: %v", p, trimPathErr(err))
		return "", nil, &o
	}
	return rel, st, nil
}

func (s *Set) listDir(_ context.Context, input json.RawMessage) Outcome {
	a, err := parseArgs(input)
	if err != nil {
		return failf("%v", err)
	}
	p, err := a.str("path", false)
	if err != nil {
		return failf("%v", err)
	}
	rel, st, o := s.dirOf("list_dir", p)
	if o != nil {
		return *o
	}
	if !st.IsDir() {
		return failf("%s is a file, not a directory; use read_file to read it", p)
	}
	ents, err := fs.ReadDir(s.root.FS(), rel)
	if err != nil {
		return failf("cannot list %s: %v", p, trimPathErr(err))
	}
	var b strings.Builder
	shown := 0
	for _, e := range ents {
		if e.Name() == ".git" {
			continue
		}
		if shown == s.lim.Entries {
			fmt.Fprintf(&b, "[… %d more entries not shown; use glob to narrow down]\n", len(ents)-shown)
			break
		}
		shown++
		switch {
		case e.IsDir():
			b.WriteString(e.Name() + "/\n")
		case e.Type()&fs.ModeSymlink != 0:
			t, _ := s.root.Readlink(path.Join(rel, e.Name()))
			fmt.Fprintf(&b, "%s -> %s\n", e.Name(), t)
		default:
			size := int64(-1)
			if info, err := e.Info(); err == nil {
				size = info.Size()
			}
			fmt.Fprintf(&b, "%s\t%d bytes\n", e.Name(), size)
		}
	}
	if shown == 0 {
		return Outcome{Content: "(the directory is empty)"}
	}
	return Outcome{Content: b.String()}
}

// walk visits the files below base in lexical order, skipping .git
// directories and never following a symlink (links are reported as
// files). It stops after SearchFiles files and reports whether it did.
func (s *Set) walk(ctx context.Context, base string, fn func(rel string, d fs.DirEntry) error) (bool, error) {
	files := 0
	limited := false
	err := fs.WalkDir(s.root.FS(), base, func(p string, d fs.DirEntry, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			if p == base {
				return err
			}
			return nil // unreadable below base: skip it, as find does
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return fs.SkipDir
			}
			return nil
		}
		if d.Name() == ".git" {
			return nil // a worktree's .git file
		}
		if files++; files > s.lim.SearchFiles {
			limited = true
			return errStop
		}
		return fn(p, d)
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return limited, err
}

func (s *Set) glob(ctx context.Context, input json.RawMessage) Outcome {
	a, err := parseArgs(input)
	if err != nil {
		return failf("%v", err)
	}
	pattern, err := a.str("pattern", true)
	if err != nil {
		return failf("%v", err)
	}
	p, err := a.str("path", false)
	if err != nil {
		return failf("%v", err)
	}
	if strings.HasPrefix(pattern, "/") {
		return failf("the pattern must be relative to path (or to the worktree), like \"**/*.go\"")
	}
	if !doublestar.ValidatePattern(pattern) {
		return failf("%q is not a valid glob pattern", pattern)
	}
	base, st, o := s.dirOf("glob", p)
	if o != nil {
		return *o
	}
	if !st.IsDir() {
		return failf("%s is a file, not a directory", p)
	}
	var matches []string
	more := 0
	limited, err := s.walk(ctx, base, func(rel string, _ fs.DirEntry) error {
		sub := strings.TrimPrefix(rel, base+"/")
		if base == "." {
			sub = rel
		}
		if doublestar.MatchUnvalidated(pattern, sub) {
			if len(matches) < s.lim.Entries {
				matches = append(matches, rel)
			} else {
				more++
			}
		}
		return nil
	})
	if err != nil {
		return failf("cannot search %s: %v", p, trimPathErr(err))
	}
	if len(matches) == 0 {
		return Outcome{Content: "no files match " + pattern + searchNote(limited, s.lim.SearchFiles)}
	}
	out := strings.Join(matches, "\n") + "\n"
	if more > 0 {
		out += fmt.Sprintf("[… %d more matches not shown; narrow the pattern]\n", more)
	}
	return Outcome{Content: out + searchNote(limited, s.lim.SearchFiles)}
}

func searchNote(limited bool, n int) string {
	if !limited {
		return ""
	}
	return fmt.Sprintf("\n[the search stopped after %d files; give a narrower path]", n)
}

// grepQuery is what one grep call asks for.
type grepQuery struct {
	re         *regexp.Regexp
	path       string // as the model gave it, for messages
	include    string // a glob on the file name, or on the path below path when it has a "/"
	filesOnly  bool
	maxMatches int64
}

// grepQueryOf reads grep's arguments; a nil query comes with the error the
// model reads.
func (s *Set) grepQueryOf(input json.RawMessage) (*grepQuery, *Outcome) {
	fail := func(format string, args ...any) (*grepQuery, *Outcome) {
		o := failf(format, args...)
		return nil, &o
	}
	a, err := parseArgs(input)
	if err != nil {
		return fail("%v", err)
	}
	q := &grepQuery{}
	pattern, err := a.str("pattern", true)
	if err == nil {
		q.path, err = a.str("path", false)
	}
	if err == nil {
		q.include, err = a.str("glob", false)
	}
	var icase, given bool
	if err == nil {
		icase, err = a.bool("ignore_case")
	}
	if err == nil {
		q.filesOnly, err = a.bool("files_only")
	}
	if err == nil {
		q.maxMatches, given, err = a.int("max_results")
	}
	if err != nil {
		return fail("%v", err)
	}
	if !given || q.maxMatches <= 0 || q.maxMatches > int64(5*s.lim.Matches) {
		q.maxMatches = int64(s.lim.Matches)
	}
	if icase {
		pattern = "(?i)" + pattern
	}
	if q.re, err = regexp.Compile(pattern); err != nil {
		return fail("the pattern is not a valid regular expression (RE2 syntax): %v", err)
	}
	if q.include != "" && !doublestar.ValidatePattern(q.include) {
		return fail("%q is not a valid glob pattern", q.include)
	}
	return q, nil
}

func (s *Set) grep(ctx context.Context, input json.RawMessage) Outcome {
	q, o := s.grepQueryOf(input)
	if o != nil {
		return *o
	}
	base, st, o := s.dirOf("grep", q.path)
	if o != nil {
		return *o
	}
	g := &grepper{s: s, q: q, base: base}
	var err error
	limited := false
	if st.IsDir() {
		limited, err = s.walk(ctx, base, func(rel string, d fs.DirEntry) error {
			if !d.Type().IsRegular() {
				return nil // links are not followed (a target is searched where it lives); FIFOs and devices are not read
			}
			return g.search(rel)
		})
	} else {
		err = g.search(base)
	}
	if errors.Is(err, errStop) {
		err = nil
	}
	if err != nil {
		return failf("cannot search %s: %v", q.path, trimPathErr(err))
	}
	return g.outcome(limited)
}

// grepper is one grep call under way: what it found and read so far.
type grepper struct {
	s         *Set
	q         *grepQuery
	base      string
	out       strings.Builder
	matches   int64
	read      int64
	budgetHit bool
}

// included reports whether the query's glob takes the file at rel.
func (g *grepper) included(rel string) bool {
	if g.q.include == "" {
		return true
	}
	name := path.Base(rel)
	if strings.Contains(g.q.include, "/") {
		name = strings.TrimPrefix(rel, g.base+"/")
	}
	return doublestar.MatchUnvalidated(g.q.include, name)
}

// search greps one file; errStop ends the whole search.
func (g *grepper) search(rel string) error {
	if !g.included(rel) {
		return nil
	}
	lim := g.s.lim
	if g.read >= lim.SearchBytes {
		g.budgetHit = true
		return errStop
	}
	// Non-blocking: a FIFO must not hang the search; it is skipped below
	// as any file that is not regular.
	f, err := g.s.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	// Only plain files: a hard-linked one may be shared with a file
	// outside the worktree (read_file refuses it too).
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil
	} else if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Nlink > 1 {
		return nil
	}
	br := bufio.NewReaderSize(io.LimitReader(f, lim.SearchBytes-g.read), 64<<10)
	if head, _ := br.Peek(sniffLen); bytes.IndexByte(head, 0) >= 0 {
		return nil // binary
	}
	return g.lines(rel, br)
}

// lines greps a file's lines from br.
func (g *grepper) lines(rel string, br *bufio.Reader) error {
	lim, q := g.s.lim, g.q
	found := false
	for n := 1; ; n++ {
		line, err := readLine(br, lim.LineChars)
		if err != nil {
			break
		}
		g.read += int64(len(line)) + 1
		if !q.re.MatchString(line) {
			continue
		}
		if !found {
			found = true
			if q.filesOnly {
				g.out.WriteString(rel + "\n")
				g.matches++
				break
			}
		}
		if len(line) > 500 {
			line = strings.ToValidUTF8(line[:500], "") + " … [cut]"
		}
		fmt.Fprintf(&g.out, "%s:%d:%s\n", rel, n, line)
		if g.matches++; g.full() {
			return errStop
		}
	}
	if g.matches >= q.maxMatches {
		return errStop
	}
	return nil
}

// full reports whether the search has found all it may show.
func (g *grepper) full() bool {
	return g.matches >= g.q.maxMatches || g.out.Len() >= g.s.lim.ReadBytes
}

// outcome is what the model reads: the matches and why the search stopped.
func (g *grepper) outcome(limited bool) Outcome {
	note := searchNote(limited, g.s.lim.SearchFiles)
	if g.matches == 0 {
		return Outcome{Content: "no matches" + note}
	}
	res := g.out.String()
	if g.full() {
		res += fmt.Sprintf("[stopped at %d matches; narrow the pattern, path or glob]\n", g.matches)
	}
	if g.budgetHit {
		res += "[the search stopped after reading its byte budget; give a narrower path]\n"
	}
	return Outcome{Content: res + note}
}
