package flow

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/drover-dev/drover/internal/drovertype"
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
	// DefaultRuntime, when non-empty, is the runtime of tasks no level of
	// the flow names (the controller's defaults.runtime): with it, a flow
	// without runtimes is valid. It is not written into the Spec; the
	// controller records the resolution with the flow.
	DefaultRuntime string
	// KnownProject reports whether a project is configured. Nil means every
	// name is accepted.
	KnownProject func(name string) bool
	// Complete asks for a spec as Parse leaves it, which is what travels on
	// the wire: its base set and a local repo path absolute. DecodeJSON
	// sets it.
	Complete bool
	// RuntimesResolved says every task's runtime was resolved outside the
	// spec (the plan the controller records with a flow): a task no level
	// of the spec gives a runtime is not a problem.
	RuntimesResolved bool
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
	if i := strings.LastIndexByte(f, '['); i >= 0 && strings.HasSuffix(f, "]") {
		return f[:i]
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
	if s.Project != "" {
		checkProject(p, s.Project, opts)
	}
	if s.Repo != "" || s.Project == "" && !p.bad["project"] { // a project supplies the repo
		checkRepo(p, s.Repo)
	}
	checkBase(p, s.Base)
	if opts.Complete {
		s.checkComplete(p)
	}
	checkRuntimeSettings(p, "runtime", s.Runtime, s.Model, s.Args, opts)
	checkValidator(p, "validator", s.Validator, opts)
	checkRetry(p, "retry", s.Retry, opts)
	if s.MaxParallel < 0 || s.MaxParallel > maxParallel {
		p.add("max_parallel", "%d is out of range: want 0 to %d (0 means the configured default)", s.MaxParallel, maxParallel)
	}
	checkScope(p, "scope", s.Scope)
	if s.Timeout < 0 {
		p.add("timeout", "negative duration %s", s.Timeout)
	}
	checkPlacementTimeout(p, "placement_timeout", s.PlacementTimeout)
	checkBudget(p, "budget", s.Budget)
	checkPublish(p, "publish", s.Publish)

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

	// A flow of a project may leave the runtime to the project's
	// configuration, which only the controller knows.
	if t.Runtime == "" && s.Runtime == "" && s.Project == "" && opts.DefaultRuntime == "" && !opts.RuntimesResolved && !p.bad["runtime"] && !p.bad["project"] {
		p.add(f+".runtime", "no runtime: set runtime on the task or a default runtime for the flow")
	}
	checkRuntimeSettings(p, f+".runtime", t.Runtime, t.Model, t.Args, opts)
	checkValidator(p, f+".validator", t.Validator, opts)
	checkRetry(p, f+".retry", t.Retry, opts)

	if t.Timeout < 0 {
		p.add(f+".timeout", "negative duration %s", t.Timeout)
	}
	checkPlacementTimeout(p, f+".placement_timeout", t.PlacementTimeout)
	checkVerify(p, f, t.Verify)
	if t.VerifyTimeout < 0 {
		p.add(f+".verify_timeout", "negative duration %s", t.VerifyTimeout)
	}
	checkScope(p, f+".scope", t.Scope)
	checkBudget(p, f+".budget", t.Budget)

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

// checkProject checks the name of the project the flow belongs to.
func checkProject(p *problems, name string, opts Options) {
	if msg := idProblem(name); msg != "" {
		p.add("project", "%s", msg)
	} else if opts.KnownProject != nil && !opts.KnownProject(name) {
		p.add("project", "unknown project %q: it is not configured", name)
	}
}

// checkRuntimeSettings checks a runtime with its model and arguments (field
// is where the name was written). A file can set a model or arguments only
// together with a name, but a Spec built in code may leave the name out to
// change the model of the runtime a lower level of the configuration
// chooses (see internal/policy).
func checkRuntimeSettings(p *problems, field, name, model string, args []string, opts Options) {
	if name != "" {
		checkRuntime(p, field, name, opts)
	}
	checkModel(p, field+".model", model)
	checkArgs(p, field+".args", args)
}

func checkValidator(p *problems, field string, v *RuntimeRef, opts Options) {
	if v != nil {
		checkRuntimeSettings(p, field, v.Name, v.Model, v.Args, opts)
	}
}

// checkModel checks a model name, which is handed to the runtime's CLI as
// an argument.
func checkModel(p *problems, field, model string) {
	if msg := ModelProblem(model); msg != "" {
		p.add(field, "%s", msg)
	}
}

// ModelProblem says what is wrong with a model name, "" when nothing is:
// the one check of a model wherever one is set (a flow, the configuration,
// a job off the wire), which the runtime's CLI gets as an argument after
// its model flag. "" (the runtime's own model) is valid.
func ModelProblem(model string) string {
	switch {
	case model == "":
		return "" // the runtime's configured model
	case len(model) > MaxModelLen:
		return fmt.Sprintf("%.20q... is %d bytes long; the limit is %d", model, len(model), MaxModelLen)
	case !utf8.ValidString(model):
		return "not valid UTF-8"
	case strings.IndexFunc(model, unicode.IsControl) >= 0:
		return fmt.Sprintf("model %q contains control characters", model)
	case model[0] == '-':
		return fmt.Sprintf("model %q starts with '-'; the runtime's CLI would read it as an option", model)
	}
	return ""
}

// checkArgs checks extra command-line arguments of a runtime.
func checkArgs(p *problems, field string, args []string) {
	if len(args) > MaxArgs {
		p.add(field, "%d arguments; the limit is %d", len(args), MaxArgs)
		return
	}
	for i, arg := range args {
		af := func() string { return fmt.Sprintf("%s[%d]", field, i) }
		switch {
		case len(arg) > MaxArgLen:
			p.add(af(), "%d bytes; the limit is %d", len(arg), MaxArgLen)
		case !utf8.ValidString(arg):
			p.add(af(), "not valid UTF-8")
		case strings.IndexFunc(arg, unicode.IsControl) >= 0:
			p.add(af(), "argument %.60q contains control characters", arg)
		}
	}
}

// Ranges of the numeric settings.
const (
	// MaxWait bounds placement_timeout and retry.rate_limit_wait: how
	// long a task may wait for a worker, or out rate limits, before it
	// ends.
	MaxWait = Duration(30 * 24 * time.Hour)

	maxAttempts    = 100
	maxCoefficient = 100
	maxParallel    = 10_000
	// MaxBudgetTokens and MaxBudgetUSD bound a budget: beyond them a
	// budget limits nothing a flow could spend, and sums stay exact.
	MaxBudgetTokens = 1_000_000_000_000_000
	MaxBudgetUSD    = 1_000_000_000
)

// CheckBudget checks a budget the way a flow file's is checked, for the
// operator's budget command and the configuration; errors name its fields
// as budget.tokens, budget.cost_usd and budget.running.
func CheckBudget(b *Budget) error {
	p := &problems{}
	checkBudget(p, "budget", b)
	return p.err()
}

// checkBudget checks a budget: limits in range (0 is none), running one of
// stop and finish.
func checkBudget(p *problems, field string, b *Budget) {
	if b == nil {
		return
	}
	if b.Tokens < 0 || b.Tokens > MaxBudgetTokens {
		p.add(field+".tokens", "%d is out of range: want 0 to %d (0 means no limit)", b.Tokens, int64(MaxBudgetTokens))
	}
	// Written negated so that NaN fails too.
	if !(b.CostUSD >= 0 && b.CostUSD <= MaxBudgetUSD) {
		p.add(field+".cost_usd", "%v is out of range: want 0 to %d (0 means no limit)", b.CostUSD, MaxBudgetUSD)
	}
	switch b.Running {
	case "", BudgetStop, BudgetFinish:
	default:
		p.add(field+".running", "%.40q is not stop or finish (what happens to running attempts when the budget is reached)", b.Running)
	}
}

// checkPlacementTimeout checks a placement_timeout: 0 inherits, else 1s to
// MaxWait.
func checkPlacementTimeout(p *problems, field string, d Duration) {
	if d != 0 && (d < Duration(time.Second) || d > MaxWait) {
		p.add(field, "%s is out of range: want 1s to %s (how long an attempt may wait for a worker that serves its runtime), or 0 to inherit", d, MaxWait)
	}
}

var classRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`)

// checkRetry checks a retry policy. Every field is optional; the relation
// between the backoffs is checked only when both are set at this level.
func checkRetry(p *problems, field string, r *RetrySpec, opts Options) {
	if r == nil {
		return
	}
	if n := r.MaxAttempts; n != nil && (*n < 1 || *n > maxAttempts) {
		p.add(field+".max_attempts", "%d is out of range: want 1 to %d (1 means no retry)", *n, maxAttempts)
	}
	if b := r.InitialBackoff; b != nil && *b < 0 {
		p.add(field+".initial_backoff", "negative duration %s", *b)
	}
	if b := r.MaxBackoff; b != nil && *b < 0 {
		p.add(field+".max_backoff", "negative duration %s", *b)
	}
	if i, m := r.InitialBackoff, r.MaxBackoff; i != nil && m != nil && *i >= 0 && *m >= 0 && *i > *m {
		p.add(field+".initial_backoff", "%s is longer than max_backoff %s", *i, *m)
	}
	// Written as negated ranges so that NaN fails them too.
	if c := r.Coefficient; c != nil && !(*c >= 1 && *c <= maxCoefficient) {
		p.add(field+".coefficient", "%v is out of range: want 1 to %d (1 keeps the backoff constant)", *c, maxCoefficient)
	}
	if j := r.Jitter; j != nil && !(*j >= 0 && *j <= 1) {
		p.add(field+".jitter", "%v is out of range: want 0 to 1 (a fraction of the backoff)", *j)
	}
	if w := r.RateLimitWait; w != nil && (*w < Duration(time.Second) || *w > MaxWait) {
		p.add(field+".rate_limit_wait", "%s is out of range: want 1s to %s (how long a task may wait out rate limits)", *w, MaxWait)
	}

	if len(r.RetryOn) > MaxRetryOn {
		p.add(field+".retry_on", "%d classes; the limit is %d", len(r.RetryOn), MaxRetryOn)
	} else {
		seen := make(map[drovertype.ErrorClass]int, len(r.RetryOn))
		for i, class := range r.RetryOn {
			cf := func() string { return fmt.Sprintf("%s.retry_on[%d]", field, i) }
			k, dup := seen[class]
			if !dup {
				seen[class] = i
			}
			switch {
			case !classRE.MatchString(string(class)):
				p.add(cf(), "%.70q is not an error class: want upper-case letters, digits and '_', like RATE_LIMITED", class)
			case dup:
				p.add(cf(), "duplicate class %q (also retry_on[%d])", class, k)
			case !class.Known():
				p.add(cf(), "unknown error class %q", class)
			}
		}
	}

	if len(r.Fallback) > MaxFallback {
		p.add(field+".fallback", "%d runtimes; the limit is %d", len(r.Fallback), MaxFallback)
	} else {
		seen := make(map[string]int, len(r.Fallback))
		for i, name := range r.Fallback {
			ff := fmt.Sprintf("%s.fallback[%d]", field, i)
			k, dup := seen[name]
			if !dup {
				seen[name] = i
			}
			switch {
			case name == "":
				p.add(ff, "empty runtime name")
			case dup:
				p.add(ff, "duplicate runtime %q (also fallback[%d])", name, k)
			default:
				checkRuntime(p, ff, name, opts)
			}
		}
	}
}

// checkVerify checks the verification commands of task field f.
func checkVerify(p *problems, f string, cmds []string) {
	if len(cmds) > MaxVerify {
		p.add(f+".verify", "%d commands; the limit is %d", len(cmds), MaxVerify)
		return
	}
	for i, cmd := range cmds {
		cf := func() string { return fmt.Sprintf("%s.verify[%d]", f, i) }
		switch {
		case strings.TrimSpace(cmd) == "":
			p.add(cf(), "blank command")
		case len(cmd) > MaxVerifyLen:
			p.add(cf(), "%d bytes; the limit is %d", len(cmd), MaxVerifyLen)
		case !utf8.ValidString(cmd):
			p.add(cf(), "not valid UTF-8")
		case strings.IndexByte(cmd, 0) >= 0:
			p.add(cf(), "contains a NUL byte")
		}
	}
}

// checkScope checks the globs of a scope.
func checkScope(p *problems, field string, sc *Scope) {
	if sc == nil {
		return
	}
	for _, list := range []struct {
		name  string
		globs []string
	}{{"allow", sc.Allow}, {"deny", sc.Deny}} {
		lf := field + "." + list.name
		if len(list.globs) > MaxGlobs {
			p.add(lf, "%d globs; the limit is %d", len(list.globs), MaxGlobs)
			continue
		}
		for i, g := range list.globs {
			if msg := globProblem(g); msg != "" {
				p.add(fmt.Sprintf("%s[%d]", lf, i), "%s", msg)
			}
		}
	}
}

// ValidScope reports whether sc's globs are well formed; nil is no scope.
// Workers check the scope of every job with it.
func ValidScope(sc *Scope) error {
	p := &problems{}
	checkScope(p, "scope", sc)
	return p.err()
}

// globProblem describes what is wrong with g as a scope glob, or returns "".
// Scope.Allows matches cleaned relative paths, so a glob that could only
// match something else is refused rather than left to never match.
func globProblem(g string) string {
	switch {
	case g == "":
		return "empty glob"
	case len(g) > MaxGlobLen:
		return fmt.Sprintf("%.20q... is %d bytes long; the limit is %d", g, len(g), MaxGlobLen)
	case !utf8.ValidString(g):
		return "not valid UTF-8"
	case strings.IndexFunc(g, unicode.IsControl) >= 0:
		return fmt.Sprintf("glob %q contains control characters", g)
	case g[0] == '/':
		return fmt.Sprintf("glob %q is absolute; write it relative to the repository root", g)
	case !doublestar.ValidatePattern(g):
		return fmt.Sprintf("glob %q is malformed (check its [ ] and { } pairs and '\\' escapes)", g)
	}
	if slices.Contains(strings.FieldsFunc(g, func(r rune) bool { return strings.ContainsRune("/{},", r) }), "..") {
		return fmt.Sprintf("glob %q contains '..'; scopes cannot reach outside the repository", g)
	}
	for _, elem := range strings.Split(g, "/") {
		switch elem {
		case "":
			if strings.HasSuffix(g, "/") {
				return fmt.Sprintf("glob %q ends with '/'; write %s** for everything under a directory", g, g)
			}
			return fmt.Sprintf("glob %q contains '//'", g)
		case ".":
			return fmt.Sprintf("glob %q contains a '.' element; write paths from the repository root without './'", g)
		}
	}
	if n := globAlternatives(g); n > MaxGlobAlternatives {
		return fmt.Sprintf("glob %q has too many {a,b} alternatives: they expand to more than %d patterns", g, MaxGlobAlternatives)
	}
	return ""
}

// globAlternatives bounds the number of patterns g's {a,b} alternatives
// expand to: the product of the number of alternatives of every group,
// which is at least the real count (nested groups make it an overestimate).
// It stops counting past MaxGlobAlternatives.
func globAlternatives(g string) int {
	total := 1
	var open []int // alternatives so far of each open group
	for i := 0; i < len(g) && total <= MaxGlobAlternatives; i++ {
		switch g[i] {
		case '\\':
			i++
		case '[':
			// A character class: its braces and commas are characters.
			for i++; i < len(g) && g[i] != ']'; i++ {
				if g[i] == '\\' {
					i++
				}
			}
		case '{':
			open = append(open, 1)
		case ',':
			if len(open) > 0 {
				open[len(open)-1]++
			}
		case '}':
			if len(open) > 0 {
				total *= open[len(open)-1]
				open = open[:len(open)-1]
			}
		}
	}
	return total
}

// checkBase checks the base revision, which is handed to git as an argument.
func checkBase(p *problems, base string) {
	if msg := baseProblem(base); msg != "" {
		p.add("base", "%s", msg)
	}
}

// ValidBase reports whether base can be a flow's base revision; "" is the
// default. Workers check the base of every job with it.
func ValidBase(base string) error {
	if msg := baseProblem(base); msg != "" {
		return errors.New("flow: invalid base: " + msg)
	}
	return nil
}

func baseProblem(base string) string {
	switch {
	case base == "":
		return "" // DefaultBase.
	case len(base) > maxRevisionLen:
		return fmt.Sprintf("%.20q... is %d bytes long; the limit is %d", base, len(base), maxRevisionLen)
	case !utf8.ValidString(base):
		return "not valid UTF-8"
	case strings.IndexFunc(base, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return fmt.Sprintf("revision %q contains whitespace or control characters", base)
	case base[0] == '-':
		return fmt.Sprintf("revision %q starts with '-'; git would read it as an option", base)
	}
	return ""
}

// maxRevisionLen bounds a base revision; git's own refs are far shorter.
const maxRevisionLen = 1024

// repoKind classifies a repo string the way git does.
type repoKind int

const (
	repoPath repoKind = iota // local path
	repoURL                  // scheme://...
	repoSCP                  // [user@]host:path, git's scp-like ssh syntax
)

var (
	schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)
	// helperRE is git's <transport>::<address> syntax, which runs the
	// remote helper git-remote-<transport>: ext:: runs any command, fd::
	// talks over a file descriptor. Git looks for it before anything else
	// (transport.c, transport_get), so it is checked first here too.
	helperRE = regexp.MustCompile(`^[A-Za-z0-9+.-]*::`)
)

// repoSchemes are the URL schemes a flow may use: git's built-in transports.
// Any other scheme makes git run a remote helper named after it.
var repoSchemes = []string{"https", "http", "ssh", "git", "file", "git+ssh", "ssh+git"}

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
	if msg := repoProblem(repo); msg != "" {
		p.add("repo", "%s", msg)
	}
}

// ValidRepo reports whether repo can be a flow's repository: a URL with one
// of git's own transports, an ssh address or a local path, nothing git would
// read as an option or hand to a remote helper. Workers check the repo of
// every job with it.
func ValidRepo(repo string) error {
	if msg := repoProblem(repo); msg != "" {
		return errors.New("flow: invalid repo: " + msg)
	}
	return nil
}

func repoProblem(repo string) string {
	switch {
	case repo == "":
		return "required: a git URL or a local path"
	case len(repo) > maxRepoLen:
		return fmt.Sprintf("%.20q... is %d bytes long; the limit is %d", repo, len(repo), maxRepoLen)
	case !utf8.ValidString(repo):
		return "not valid UTF-8"
	case strings.IndexFunc(repo, unicode.IsControl) >= 0:
		return fmt.Sprintf("%q contains control characters", repo)
	case repo[0] == '-':
		return fmt.Sprintf("%q starts with '-'; git would read it as an option", repo)
	case helperRE.MatchString(repo):
		return fmt.Sprintf("%q uses git's transport::address syntax, which runs a remote helper program; write an https, ssh or file URL, an ssh address or a path", repo)
	}
	hasSpace := strings.IndexFunc(repo, unicode.IsSpace) >= 0
	switch kindOf(repo) {
	case repoURL:
		scheme, rest, _ := strings.Cut(repo, "://")
		host := rest
		if i := strings.IndexByte(host, '/'); i >= 0 {
			host = host[:i]
		}
		if i := strings.LastIndexByte(host, '@'); i >= 0 {
			host = host[i+1:]
		}
		switch {
		case hasSpace:
			return fmt.Sprintf("URL %q contains whitespace", repo)
		case !slices.Contains(repoSchemes, strings.ToLower(scheme)):
			return fmt.Sprintf("URL %q has scheme %q, which git would hand to a remote helper program; use one of %s", repo, scheme, strings.Join(repoSchemes, ", "))
		case rest == "":
			return fmt.Sprintf("URL %q has nothing after the scheme", repo)
		case strings.HasPrefix(host, "-"):
			return fmt.Sprintf("URL %q has a host starting with '-'; ssh would read it as an option", repo)
		}
	case repoSCP:
		colon := strings.IndexByte(repo, ':')
		host := repo[:colon]
		if i := strings.LastIndexByte(host, '@'); i >= 0 {
			host = host[i+1:]
		}
		switch {
		case hasSpace:
			return fmt.Sprintf("ssh address %q contains whitespace", repo)
		case colon == 0 || repo[colon-1] == '@':
			return fmt.Sprintf("ssh address %q has no host before ':'", repo)
		case colon == len(repo)-1:
			return fmt.Sprintf("ssh address %q has no path after ':'", repo)
		case strings.HasPrefix(host, "-"):
			return fmt.Sprintf("ssh address %q has a host starting with '-'; ssh would read it as an option", repo)
		}
	}
	return ""
}

// maxRepoLen bounds a repo URL or path.
const maxRepoLen = 4096
