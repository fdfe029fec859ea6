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
	"strings"
	"syscall"
)

// sniffLen is how much of a file is looked at to call it binary, as git
// and grep do: a NUL byte in it.
const sniffLen = 8000

// openRegular opens the canonical path rel through the worktree's root,
// non-blocking (a FIFO must not hang the loop), and checks on the open
// descriptor — not on the name, which could change in between — that it is
// a regular file with a single link.
func (s *Set) openRegular(tool, shown, rel string, flag int) (*os.File, fs.FileInfo, *Outcome) {
	// A FIFO or device must be refused, not opened: opening one for
	// writing without a reader fails with ENXIO, and some devices act on
	// open. The descriptor check below stays the one that counts.
	if st, err := s.root.Lstat(rel); err == nil && !st.Mode().IsRegular() && !st.IsDir() && st.Mode()&fs.ModeSymlink == 0 {
		o := s.refuse(tool, shown, ReasonNotRegular)
		return nil, nil, &o
	}
	f, err := s.root.OpenFile(rel, flag|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		switch {
		case errors.Is(err, syscall.ENXIO):
			o := s.refuse(tool, shown, ReasonNotRegular)
			return nil, nil, &o
		case isEscape(err):
			o := s.refuse(tool, shown, ReasonSymlinkOut)
			return nil, nil, &o
		case errors.Is(err, fs.ErrNotExist):
			o := failf("%s does not exist (paths are relative to the worktree %s)", shown, s.dir)
			return nil, nil, &o
		case errors.Is(err, syscall.EISDIR):
			o := failf("%s is a directory; use list_dir or glob to see what it holds", shown)
			return nil, nil, &o
		}
		o := failf("cannot open %s: %v", shown, trimPathErr(err))
		return nil, nil, &o
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		o := failf("cannot stat %s: %v", shown, trimPathErr(err))
		return nil, nil, &o
	}
	if st.IsDir() {
		f.Close()
		o := failf("%s is a directory; use list_dir or glob to see what it holds", shown)
		return nil, nil, &o
	}
	if !st.Mode().IsRegular() {
		f.Close()
		o := s.refuse(tool, shown, ReasonNotRegular)
		return nil, nil, &o
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Nlink > 1 {
		f.Close()
		o := s.refuse(tool, shown, ReasonHardLinked)
		return nil, nil, &o
	}
	return f, st, nil
}

// trimPathErr drops the path os adds, which is the canonical one and not
// what the model wrote.
func trimPathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func (s *Set) readFile(_ context.Context, input json.RawMessage) Outcome {
	a, err := parseArgs(input)
	if err != nil {
		return failf("%v", err)
	}
	p, err := a.str("path", true)
	if err != nil {
		return failf("%v", err)
	}
	offset, _, err := a.int("offset")
	if err != nil {
		return failf("%v", err)
	}
	limit, hasLimit, err := a.int("limit")
	if err != nil {
		return failf("%v", err)
	}
	if offset < 0 || (hasLimit && limit < 1) {
		return failf("offset must be 1 or more (the first line to show) and limit at least 1")
	}
	if offset == 0 {
		offset = 1
	}
	if !hasLimit || limit > int64(s.lim.ReadLines) {
		limit = int64(s.lim.ReadLines)
	}
	rel, o := s.resolveRead("read_file", p)
	if o != nil {
		return *o
	}
	f, st, o := s.openRegular("read_file", p, rel, os.O_RDONLY)
	if o != nil {
		return *o
	}
	defer f.Close()
	if st.Size() == 0 {
		return Outcome{Content: "(the file is empty)"}
	}
	head := make([]byte, sniffLen)
	n, _ := io.ReadFull(f, head)
	if bytes.IndexByte(head[:n], 0) >= 0 {
		return failf("%s is a binary file (%d bytes); it cannot be shown as text", p, st.Size())
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return failf("cannot read %s: %v", p, trimPathErr(err))
	}
	var out strings.Builder
	br := bufio.NewReaderSize(f, 64<<10)
	line, shown := int64(0), int64(0)
	cut := ""
	for {
		text, err := readLine(br, s.lim.LineChars)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return failf("cannot read %s: %v", p, trimPathErr(err))
			}
			break
		}
		line++
		if line < offset {
			continue
		}
		if shown == limit {
			cut = fmt.Sprintf("[showing lines %d-%d; the file goes on: read again with offset %d]", offset, line-1, line)
			break
		}
		entry := fmt.Sprintf("%6d\t%s\n", line, text)
		if out.Len()+len(entry) > s.lim.ReadBytes {
			cut = fmt.Sprintf("[output limit reached after line %d: read again with offset %d]", line-1, line)
			break
		}
		out.WriteString(entry)
		shown++
	}
	if line < offset {
		return failf("%s has %d lines; offset %d is past the end", p, line, offset)
	}
	return Outcome{Content: out.String() + cut}
}

// readLine reads one line without its newline, cutting it at limit bytes
// (the rest of the line is skipped, never held in memory). At the end of
// the input it returns io.EOF and no text.
func readLine(br *bufio.Reader, limit int) (string, error) {
	var b []byte
	long := false
	for {
		frag, err := br.ReadSlice('\n')
		if err == nil {
			frag = frag[:len(frag)-1]
		}
		if room := limit - len(b); len(frag) > room {
			long, frag = true, frag[:max(room, 0)]
		}
		b = append(b, frag...)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err != nil && len(b) == 0 && !long:
			return "", err
		}
		return finishLine(b, long), nil
	}
}

func finishLine(b []byte, long bool) string {
	b = bytes.TrimSuffix(b, []byte("\r"))
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	if long {
		s += " … [line cut]"
	}
	return s
}

func (s *Set) writeFile(_ context.Context, input json.RawMessage) Outcome {
	a, err := parseArgs(input)
	if err != nil {
		return failf("%v", err)
	}
	p, err := a.str("path", true)
	if err != nil {
		return failf("%v", err)
	}
	content, err := a.str("content", true)
	if err != nil {
		return failf("%v", err)
	}
	if len(content) > s.lim.WriteBytes {
		return failf("the content is %d bytes; the limit is %d", len(content), s.lim.WriteBytes)
	}
	rel, o := s.resolveWrite("write_file", p)
	if o != nil {
		return *o
	}
	if dir := path.Dir(rel); dir != "." {
		if err := s.root.MkdirAll(dir, 0o755); err != nil {
			if isEscape(err) {
				return s.refuse("write_file", p, ReasonSymlinkOut)
			}
			return failf("cannot create the directory %s: %v", dir, trimPathErr(err))
		}
	}
	_, statErr := s.root.Lstat(rel)
	created := errors.Is(statErr, fs.ErrNotExist)
	f, _, o := s.openRegular("write_file", p, rel, os.O_WRONLY|os.O_CREATE)
	if o != nil {
		return *o
	}
	defer f.Close()
	if err := f.Truncate(0); err != nil {
		return failf("cannot write %s: %v", p, trimPathErr(err))
	}
	if _, err := f.WriteAt([]byte(content), 0); err != nil {
		return failf("cannot write %s: %v", p, trimPathErr(err))
	}
	if err := f.Close(); err != nil {
		return failf("cannot write %s: %v", p, trimPathErr(err))
	}
	verb := "overwrote"
	if created {
		verb = "created"
	}
	return Outcome{Content: fmt.Sprintf("%s %s (%d bytes)", verb, rel, len(content)), Changed: []string{rel}}
}

func (s *Set) editFile(_ context.Context, input json.RawMessage) Outcome {
	a, err := parseArgs(input)
	if err != nil {
		return failf("%v", err)
	}
	p, err := a.str("path", true)
	if err != nil {
		return failf("%v", err)
	}
	old, err := a.str("old_string", true)
	if err != nil {
		return failf("%v", err)
	}
	repl, err := a.str("new_string", true)
	if err != nil {
		return failf("%v", err)
	}
	all, err := a.bool("replace_all")
	if err != nil {
		return failf("%v", err)
	}
	if old == "" {
		return failf("old_string is empty; to create or overwrite a whole file use write_file")
	}
	if old == repl {
		return failf("old_string and new_string are the same; there is nothing to change")
	}
	rel, o := s.resolveWrite("edit_file", p)
	if o != nil {
		return *o
	}
	f, st, o := s.openRegular("edit_file", p, rel, os.O_RDWR)
	if o != nil {
		return *o
	}
	defer f.Close()
	if st.Size() > int64(s.lim.WriteBytes) {
		return failf("%s is %d bytes; edit_file handles files up to %d", p, st.Size(), s.lim.WriteBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(s.lim.WriteBytes)+1))
	if err != nil {
		return failf("cannot read %s: %v", p, trimPathErr(err))
	}
	text := string(data)
	n := strings.Count(text, old)
	switch {
	case n == 0:
		return failf("old_string was not found in %s; it must match the file exactly, whitespace and indentation included (read_file shows line numbers, which are not part of the file)", p)
	case n > 1 && !all:
		return failf("old_string occurs %d times in %s; include more surrounding lines to make it unique, or set replace_all to true", n, p)
	}
	if !all {
		n = 1
	}
	out := strings.Replace(text, old, repl, n)
	if len(out) > s.lim.WriteBytes {
		return failf("the edited file would be %d bytes; the limit is %d", len(out), s.lim.WriteBytes)
	}
	if err := f.Truncate(0); err != nil {
		return failf("cannot write %s: %v", p, trimPathErr(err))
	}
	if _, err := f.WriteAt([]byte(out), 0); err != nil {
		return failf("cannot write %s: %v", p, trimPathErr(err))
	}
	if err := f.Close(); err != nil {
		return failf("cannot write %s: %v", p, trimPathErr(err))
	}
	return Outcome{Content: fmt.Sprintf("replaced %d occurrence(s) in %s", n, rel), Changed: []string{rel}}
}
