package flow

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Options tunes validation to the controller that will run the flow.
type Options struct {
	// KnownRuntime reports whether a runtime name is configured. Nil means
	// every name is accepted.
	KnownRuntime func(name string) bool
	// RepoOverride, when non-empty, replaces the file's repo (used by
	// `submit --repo`) before validation. A relative local path is resolved
	// against the process's working directory, not the flow file's.
	RepoOverride string
	// DefaultRuntime, when non-empty, becomes the flow's runtime if the file
	// names none (the controller's defaults.runtime). Parse records it in the
	// Spec, so the flow keeps the runtime it was accepted with; Validate
	// ignores it.
	DefaultRuntime string
}

// Validate checks a Spec built in code; Parse calls it too. The errors it
// returns have no line numbers but name the field, e.g.
// `tasks[2].depends_on[0]`. It does not modify s.
func (s *Spec) Validate(opts Options) error {
	p := &problems{}
	s.validate(p, opts)
	return p.err()
}

// position is a 1-based line and column in the flow file.
type position struct{ line, col int }

// problems collects the Errors of one flow. For a parsed file it also knows
// where each field was written, so checks that only see the Spec can still
// point at a line.
type problems struct {
	file string
	pos  map[string]position // field path -> position; nil for Validate
	bad  map[string]bool     // fields the decoder already complained about
	errs []*Error
	more int // problems beyond MaxProblems
}

// record keeps e unless MaxProblems are already recorded.
func (p *problems) record(e *Error) {
	if len(p.errs) >= MaxProblems {
		p.more++
		return
	}
	p.errs = append(p.errs, e)
}

// err returns the problems as an error, or nil.
func (p *problems) err() error { return newValidationError(p.errs, p.more) }

// add records a problem with field, positioned at the field or, when the
// field is absent from the file, at the closest enclosing one. Problems
// inside a field the decoder already rejected are dropped: they would only
// repeat that complaint.
func (p *problems) add(field, format string, args ...any) {
	for f := field; ; f = parentField(f) {
		if p.bad[f] {
			return
		}
		if f == "" {
			break
		}
	}
	if len(p.errs) >= MaxProblems {
		p.more++ // before formatting: a hostile file can hold many problems
		return
	}
	at := p.at(field)
	p.record(&Error{File: p.file, Line: at.line, Column: at.col, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// at returns the position of field or of its closest enclosing field.
func (p *problems) at(field string) position {
	if p.pos == nil {
		return position{}
	}
	for f := field; ; f = parentField(f) {
		if at, ok := p.pos[f]; ok {
			return at
		}
		if f == "" {
			return position{}
		}
	}
}

// where describes a field's location for a message that refers to a second
// place: "line 4" when known, else the field path.
func (p *problems) where(field string) string {
	if at := p.at(field); at.line > 0 {
		return "line " + strconv.Itoa(at.line)
	}
	return field
}

// parentField strips the last component of a field path:
// "tasks[1].depends_on[0]" -> "tasks[1].depends_on" -> "tasks[1]" -> "tasks" -> "".
func parentField(f string) string {
	if strings.HasSuffix(f, "]") {
		return f[:strings.LastIndexByte(f, '[')]
	}
	if i := strings.LastIndexByte(f, '.'); i >= 0 {
		return f[:i]
	}
	return ""
}

func (s *Spec) validate(p *problems, opts Options) {
	if s.Name == "" {
		p.add("name", "required: give the flow an id-like name")
	} else if msg := idProblem(s.Name); msg != "" {
		p.add("name", "%s", msg)
	}
	checkRepo(p, s.Repo)
	checkBase(p, s.Base)
	if s.Runtime != "" {
		checkRuntime(p, "runtime", s.Runtime, opts)
	}
	if s.Timeout < 0 {
		p.add("timeout", "negative duration %s", s.Timeout)
	}

	if len(s.Tasks) == 0 {
		p.add("tasks", "at least one task is required")
		return
	}
	if len(s.Tasks) > MaxTasks {
		p.add("tasks", "%d tasks; the limit is %d", len(s.Tasks), MaxTasks)
		return
	}

	first := make(map[string]int, len(s.Tasks)) // id -> index of its first task
	for i := range s.Tasks {
		if id := s.Tasks[i].ID; id != "" {
			if _, dup := first[id]; !dup {
				first[id] = i
			}
		}
	}
	for i := range s.Tasks {
		s.validateTask(p, opts, i, first)
	}
	s.checkCycle(p)
}

func (s *Spec) validateTask(p *problems, opts Options, i int, first map[string]int) {
	t := &s.Tasks[i]
	f := fmt.Sprintf("tasks[%d]", i)

	switch {
	case t.ID == "":
		p.add(f+".id", "required: every task needs an id")
	case idProblem(t.ID) != "":
		p.add(f+".id", "%s", idProblem(t.ID))
	case first[t.ID] != i:
		p.add(f+".id", "duplicate task id %q (first defined at %s)", t.ID, p.where(fmt.Sprintf("tasks[%d].id", first[t.ID])))
	}

	switch {
	case strings.TrimSpace(t.Prompt) == "":
		p.add(f+".prompt", "required: tell the agent what to do")
	case len(t.Prompt) > MaxPromptSize:
		p.add(f+".prompt", "%d bytes; the limit is %d", len(t.Prompt), MaxPromptSize)
	case !utf8.ValidString(t.Prompt):
		p.add(f+".prompt", "not valid UTF-8")
	case strings.IndexByte(t.Prompt, 0) >= 0:
		// Runtimes may receive the prompt as a command-line argument.
		p.add(f+".prompt", "contains a NUL byte")
	}

	switch {
	case t.Runtime != "":
		checkRuntime(p, f+".runtime", t.Runtime, opts)
	case s.Runtime == "":
		p.add(f+".runtime", "no runtime: set runtime on the task or a default runtime for the flow")
	}

	if t.Timeout < 0 {
		p.add(f+".timeout", "negative duration %s", t.Timeout)
	}

	seen := make(map[string]int, len(t.DependsOn)) // id -> first index in depends_on
	for j, dep := range t.DependsOn {
		df := func() string { return fmt.Sprintf("%s.depends_on[%d]", f, j) } // only on error: lists can be long
		k, dup := seen[dep]
		if !dup {
			seen[dep] = j
		}
		switch {
		case dep == "":
			p.add(df(), "empty task id")
		case dup:
			p.add(df(), "duplicate dependency %q (also depends_on[%d])", dep, k)
		case dep == t.ID:
			p.add(df(), "task %q depends on itself", dep)
		default:
			if _, ok := first[dep]; !ok {
				p.add(df(), "unknown task %q", dep)
			}
		}
	}
}

// checkCycle reports the first dependency cycle found, walking tasks in file
// order, as "a -> b -> a" where an arrow reads "depends on". One cycle is
// enough to act on; the rest show up on the next try.
func (s *Spec) checkCycle(p *problems) {
	g := s.graph()
	const (
		unvisited = iota
		active    // on the current path
		finished
	)
	state := make([]int, len(s.Tasks))
	var path []int
	var visit func(i int) bool // reports whether it found a cycle
	visit = func(i int) bool {
		state[i] = active
		path = append(path, i)
		for _, j := range g.deps[i] {
			switch state[j] {
			case active:
				s.reportCycle(p, path, j)
				return true
			case unvisited:
				if visit(j) {
					return true
				}
			}
		}
		path = path[:len(path)-1]
		state[i] = finished
		return false
	}
	for i := range s.Tasks {
		if state[i] == unvisited && visit(i) {
			return
		}
	}
}

// cycleShown is how many ids each end of a long cycle's message shows.
const cycleShown = 8

// reportCycle reports the cycle closed by the last task on path depending on
// task j, at that depends_on entry.
func (s *Spec) reportCycle(p *problems, path []int, j int) {
	start := 0
	for path[start] != j {
		start++
	}
	ids := make([]string, 0, len(path)-start+1)
	for _, k := range path[start:] {
		ids = append(ids, s.Tasks[k].ID)
	}
	ids = append(ids, s.Tasks[j].ID)
	if len(ids) > 2*cycleShown+1 {
		// Keep a long cycle's message readable; both ends locate it.
		n := len(ids) - 1
		ids = slices.Concat(ids[:cycleShown], []string{fmt.Sprintf("... (%d tasks)", n)}, ids[len(ids)-cycleShown:])
	}

	last := path[len(path)-1]
	field := fmt.Sprintf("tasks[%d].depends_on", last)
	for k, dep := range s.Tasks[last].DependsOn {
		if dep == s.Tasks[j].ID {
			field = fmt.Sprintf("%s[%d]", field, k)
			break
		}
	}
	p.add(field, "dependency cycle: %s", strings.Join(ids, " -> "))
}

// checkRuntime checks a runtime name. Its format is left to the
// configuration; only characters no config key would contain are refused.
func checkRuntime(p *problems, field, name string, opts Options) {
	if !utf8.ValidString(name) || strings.IndexFunc(name, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		p.add(field, "runtime %q contains whitespace or control characters", name)
		return
	}
	if opts.KnownRuntime != nil && !opts.KnownRuntime(name) {
		p.add(field, "unknown runtime %q: it is not configured", name)
	}
}

// checkBase checks the base revision, which is handed to git as an argument.
func checkBase(p *problems, base string) {
	switch {
	case base == "":
		// DefaultBase.
	case !utf8.ValidString(base):
		p.add("base", "not valid UTF-8")
	case strings.IndexFunc(base, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		p.add("base", "revision %q contains whitespace or control characters", base)
	case base[0] == '-':
		p.add("base", "revision %q starts with '-'; git would read it as an option", base)
	}
}

// repoKind classifies a repo string the way git does.
type repoKind int

const (
	repoPath repoKind = iota // local path
	repoURL                  // scheme://...
	repoSCP                  // [user@]host:path, git's scp-like ssh syntax
)

var schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)

// kindOf follows git's rule (connect.c, url_is_local_not_ssh): without
// "://", a colon before the first slash makes it an ssh address, so
// "git@host:org/repo" is remote and "./a:b" is a path.
func kindOf(repo string) repoKind {
	if schemeRE.MatchString(repo) {
		return repoURL
	}
	colon := strings.IndexByte(repo, ':')
	slash := strings.IndexByte(repo, '/')
	if colon >= 0 && (slash < 0 || colon < slash) {
		return repoSCP
	}
	return repoPath
}

// checkRepo checks the repo. A local path need not exist here: the flow may
// be validated on a machine other than the one that clones it.
func checkRepo(p *problems, repo string) {
	switch {
	case repo == "":
		p.add("repo", "required: a git URL or a local path")
		return
	case !utf8.ValidString(repo):
		p.add("repo", "not valid UTF-8")
		return
	case strings.IndexFunc(repo, unicode.IsControl) >= 0:
		p.add("repo", "%q contains control characters", repo)
		return
	case repo[0] == '-':
		p.add("repo", "%q starts with '-'; git would read it as an option", repo)
		return
	}
	hasSpace := strings.IndexFunc(repo, unicode.IsSpace) >= 0
	switch kindOf(repo) {
	case repoURL:
		if hasSpace {
			p.add("repo", "URL %q contains whitespace", repo)
		} else if rest := repo[strings.Index(repo, "://")+3:]; rest == "" {
			p.add("repo", "URL %q has nothing after the scheme", repo)
		}
	case repoSCP:
		colon := strings.IndexByte(repo, ':')
		switch {
		case hasSpace:
			p.add("repo", "ssh address %q contains whitespace", repo)
		case colon == 0 || repo[colon-1] == '@':
			p.add("repo", "ssh address %q has no host before ':'", repo)
		case colon == len(repo)-1:
			p.add("repo", "ssh address %q has no path after ':'", repo)
		}
	}
}
