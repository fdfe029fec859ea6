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

func (s *Set) grep(ctx context.Context, input json.RawMessage) Outcome {
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
	include, err := a.str("glob", false)
	if err != nil {
		return failf("%v", err)
	}
	icase, err := a.bool("ignore_case")
	if err != nil {
		return failf("%v", err)
	}
	filesOnly, err := a.bool("files_only")
	if err != nil {
		return failf("%v", err)
	}
	maxMatches, given, err := a.int("max_results")
	if err != nil {
		return failf("%v", err)
	}
	if !given || maxMatches <= 0 || maxMatches > int64(5*s.lim.Matches) {
		maxMatches = int64(s.lim.Matches)
	}
	if icase {
		pattern = "(?i)" + pattern
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return failf("the pattern is not a valid regular expression (RE2 syntax): %v", err)
	}
	if include != "" && !doublestar.ValidatePattern(include) {
		return failf("%q is not a valid glob pattern", include)
	}
	base, st, o := s.dirOf("grep", p)
	if o != nil {
		return *o
	}
	var out strings.Builder
	matches, files := int64(0), 0
	var read int64
	budgetHit := false
	search := func(rel string) error {
		if include != "" {
			name := path.Base(rel)
			if strings.Contains(include, "/") {
				name = strings.TrimPrefix(rel, base+"/")
			}
			if !doublestar.MatchUnvalidated(include, name) {
				return nil
			}
		}
		if read >= s.lim.SearchBytes {
			budgetHit = true
			return errStop
		}
		// Non-blocking: a FIFO must not hang the search; it is skipped
		// below as any file that is not regular.
		f, err := s.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
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
		br := bufio.NewReaderSize(io.LimitReader(f, s.lim.SearchBytes-read), 64<<10)
		if head, _ := br.Peek(sniffLen); bytes.IndexByte(head, 0) >= 0 {
			return nil // binary
		}
		found := false
		for n := 1; ; n++ {
			line, err := readLine(br, s.lim.LineChars)
			if err != nil {
				break
			}
			read += int64(len(line)) + 1
			if !re.MatchString(line) {
				continue
			}
			if !found {
				files++
				found = true
				if filesOnly {
					out.WriteString(rel + "\n")
					matches++
					break
				}
			}
			if len(line) > 500 {
				line = strings.ToValidUTF8(line[:500], "") + " … [cut]"
			}
			fmt.Fprintf(&out, "%s:%d:%s\n", rel, n, line)
			if matches++; matches >= maxMatches || out.Len() >= s.lim.ReadBytes {
				return errStop
			}
		}
		if matches >= maxMatches {
			return errStop
		}
		return nil
	}
	limited := false
	if st.IsDir() {
		limited, err = s.walk(ctx, base, func(rel string, d fs.DirEntry) error {
			if !d.Type().IsRegular() {
				return nil // links are not followed (a target is searched where it lives); FIFOs and devices are not read
			}
			return search(rel)
		})
		if errors.Is(err, errStop) {
			err = nil
		}
	} else {
		err = search(base)
		if errors.Is(err, errStop) {
			err = nil
		}
	}
	if err != nil {
		return failf("cannot search %s: %v", p, trimPathErr(err))
	}
	if matches == 0 {
		return Outcome{Content: "no matches" + searchNote(limited, s.lim.SearchFiles)}
	}
	res := out.String()
	if matches >= maxMatches || out.Len() >= s.lim.ReadBytes {
		res += fmt.Sprintf("[stopped at %d matches; narrow the pattern, path or glob]\n", matches)
	}
	if budgetHit {
		res += "[the search stopped after reading its byte budget; give a narrower path]\n"
	}
	return Outcome{Content: res + searchNote(limited, s.lim.SearchFiles)}
}
