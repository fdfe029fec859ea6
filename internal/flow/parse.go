package flow

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/drover-dev/drover/internal/drovertype"
	yaml "go.yaml.in/yaml/v3"
)

// Parse decodes and validates a flow file. filename is used in error messages
// and to resolve a relative local repo path against the file's directory.
//
// It walks the YAML node tree itself rather than decoding into structs, so
// that every problem, including unknown and repeated fields, carries the line
// it was found on. All problems are returned at once in a *ValidationError,
// which wraps ErrInvalid.
func Parse(filename string, data []byte, opts Options) (*Spec, error) {
	p := &problems{file: filename, pos: map[string]position{}, bad: map[string]bool{}}
	if len(data) > MaxFileSize {
		p.record(&Error{File: filename, Msg: fmt.Sprintf("file is %d bytes; the limit is %d", len(data), MaxFileSize)})
		return nil, p.err()
	}
	if e := checkText(filename, data); e != nil {
		p.record(e)
		return nil, p.err()
	}
	root := decodeDocument(p, data)
	if root == nil {
		return nil, p.err()
	}

	s := &Spec{}
	d := decoder{p: p}
	d.spec(root, s)
	repoDir := filepath.Dir(filename)
	if opts.RepoOverride != "" {
		s.Repo = opts.RepoOverride
		repoDir = "."
		p.pos["repo"] = position{} // not from the file: no line to point at
		delete(p.bad, "repo")      // the override is checked even if the file's repo was broken
	}
	s.validate(p, opts)
	if err := p.err(); err != nil {
		return nil, err
	}

	if s.Base == "" {
		s.Base = DefaultBase
	}
	if s.Repo != "" && kindOf(s.Repo) == repoPath { // "" with a project: the controller fills it in
		repo := s.Repo
		if !filepath.IsAbs(repo) {
			repo = filepath.Join(repoDir, repo)
		}
		abs, err := filepath.Abs(repo)
		if err != nil {
			return nil, fmt.Errorf("flow: %s: resolve repo path %q: %w", filename, s.Repo, err)
		}
		s.Repo = abs
	}
	return s, nil
}

// Locate places problems found in a flow file's Spec after Parse — by the
// controller, which validates it against its own runtimes and projects —
// in the file, as Parse places its own: each gets filename and the line
// and column of its field, or of the closest enclosing field the file
// has. It returns them as a *ValidationError, nil for none.
func Locate(filename string, data []byte, errs []*Error) error {
	p := &problems{file: filename, pos: map[string]position{}, bad: map[string]bool{}}
	if len(data) <= MaxFileSize && checkText(filename, data) == nil {
		if root := decodeDocument(p, data); root != nil {
			decoder{p: p}.spec(root, &Spec{})
		}
	}
	out := &problems{file: filename, pos: p.pos}
	for _, e := range errs {
		if e != nil {
			out.add(e.Field, "%s", e.Msg)
		}
	}
	return out.err()
}

// decodeDocument returns the root node of the single YAML document in data,
// or nil after reporting why there is none.
func decodeDocument(p *problems, data []byte) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	switch err := decodeNode(dec, &doc); {
	case errors.Is(err, io.EOF):
		p.record(&Error{File: p.file, Msg: "file is empty: it holds no YAML document"})
		return nil
	case err != nil:
		p.record(syntaxError(p.file, err))
		return nil
	}

	var extra yaml.Node
	switch err := decodeNode(dec, &extra); {
	case err == nil:
		p.record(&Error{File: p.file, Line: extra.Line, Column: extra.Column,
			Msg: "more than one YAML document; a flow file holds exactly one (remove the extra '---')"})
		return nil
	case !errors.Is(err, io.EOF):
		p.record(syntaxError(p.file, err))
		return nil
	}

	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	switch {
	case root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null":
		p.record(&Error{File: p.file, Line: root.Line, Column: root.Column, Msg: "file is empty: it holds no fields"})
		return nil
	case root.Kind != yaml.MappingNode:
		p.record(&Error{File: p.file, Line: root.Line, Column: root.Column,
			Msg: fmt.Sprintf("a flow must be a mapping of fields (name, repo, tasks, ...), got %s", describe(root))})
		return nil
	}
	// Only a mapping's position: an empty document's null is placed past
	// its end ("---" puts it on line 2 of 1).
	p.pos[""] = position{root.Line, root.Column}
	return root
}

// decodeNode decodes the next document. The flow file is untrusted input to
// a long-running controller, so a panic inside the YAML library becomes an
// error instead of a crash.
func decodeNode(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: internal error: %v", r)
		}
	}()
	return dec.Decode(n)
}

// checkText rejects bytes YAML does not allow, with their position. The
// yaml library reports these without a line; finding them first also keeps
// invalid UTF-8 out of every string in a Spec.
func checkText(file string, data []byte) *Error {
	line, col := 1, 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		var msg string
		switch {
		case r == utf8.RuneError && size <= 1:
			msg = "invalid UTF-8"
		case !yamlPrintable(r):
			msg = fmt.Sprintf("character %U is not allowed in YAML", r)
		}
		if msg != "" {
			return &Error{File: file, Line: line, Column: col, Msg: msg}
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
		i += size
	}
	return nil
}

// yamlPrintable is the YAML 1.2 c-printable set (spec 5.1).
func yamlPrintable(r rune) bool {
	switch {
	case r == '\t', r == '\n', r == '\r', r == 0x85:
		return true
	case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
		return false
	case r >= 0xd800 && r < 0xe000, r == 0xfffe, r == 0xffff:
		return false
	}
	return true
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): `)

// syntaxError turns a yaml library error ("yaml: line 3: did not find
// expected key") into an Error carrying the line.
func syntaxError(file string, err error) *Error {
	msg := err.Error()
	e := &Error{File: file}
	switch m := yamlLineRE.FindStringSubmatch(msg); {
	case m != nil:
		e.Line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
	case strings.HasPrefix(msg, "yaml: unknown anchor"):
		// Reported by the composer, which knows no position.
		msg = strings.TrimPrefix(msg, "yaml: ") + " (anchors and aliases are not supported)"
	default:
		// The scanner's lines are 0-based and it leaves out line 0, so
		// a syntax error without a line is on the first one. (checkText
		// has already caught the reader errors, which have no line.)
		e.Line = 1
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	e.Msg = "invalid YAML: " + msg
	return e
}

// decoder fills a Spec from the node tree, reporting type problems with the
// position of the node at fault and recording where each field was written.
// It reads both forms of a flow: a file's YAML, and the wire form's JSON
// read into the same kind of tree (json.go).
type decoder struct {
	p *problems
	// wire is set for the wire form, the Spec's JSON. It differs from a
	// file in four ways: a string is wanted where a string is written (`id:
	// 1` is refused, not read as "1"), a runtime is a name with its model
	// and args as fields of their own and a validator always a mapping,
	// verify always a list, and its nodes have no lines.
	wire bool
}

var (
	specFields = []string{"name", "repo", "base", "project", "runtime", "validator", "review", "retry",
		"max_parallel", "scope", "timeout", "placement_timeout", "budget", "tasks", "publish"}
	taskFields = []string{"id", "prompt", "depends_on", "runtime", "validator", "review", "retry",
		"timeout", "placement_timeout", "verify", "verify_timeout", "scope", "budget"}
	budgetFields  = []string{"tokens", "cost_usd", "running"}
	runtimeFields = []string{"name", "model", "args"}
	retryFields   = []string{"max_attempts", "initial_backoff", "coefficient", "max_backoff", "jitter",
		"retry_on", "fallback", "rate_limit_wait"}
	scopeFields = []string{"allow", "deny"}

	specWireFields = wireFields(specFields)
	taskWireFields = wireFields(taskFields)
)

// wireFields lists the fields of a spec or a task in the wire form, where
// a runtime's model and args sit beside it, as they do in a Spec.
func wireFields(fields []string) []string {
	i := slices.Index(fields, "runtime") + 1
	return slices.Concat(fields[:i], []string{"model", "args"}, fields[i:])
}

// known returns the fields of a spec or a task in the form d reads.
func (d decoder) known(file, wire []string) []string {
	if d.wire {
		return wire
	}
	return file
}

// fieldHints complete the message about an unknown field that is known
// elsewhere.
var fieldHints = map[string]string{
	"model": "; a model is set with its runtime: runtime: {name: NAME, model: MODEL}",
	"args":  "; arguments are set with their runtime: runtime: {name: NAME, args: [...]}",
}

func (d decoder) spec(n *yaml.Node, s *Spec) {
	d.fields(n, "", d.known(specFields, specWireFields), func(key, field string, v *yaml.Node) {
		switch key {
		case "name":
			s.Name, _ = d.str(v, field)
		case "repo":
			s.Repo, _ = d.str(v, field)
		case "base":
			s.Base, _ = d.str(v, field)
		case "project":
			s.Project, _ = d.str(v, field)
		case "runtime":
			d.runtime(v, field, &s.Runtime, &s.Model, &s.Args)
		case "model": // the wire form's
			s.Model, _ = d.str(v, field)
		case "args": // the wire form's
			s.Args = d.strs(v, field, "a list of arguments", MaxArgs)
		case "validator":
			s.Validator = d.validator(v, field)
		case "review":
			s.Review = d.boolean(v, field)
		case "retry":
			s.Retry = d.retry(v, field)
		case "max_parallel":
			if mp := d.integer(v, field); mp != nil {
				s.MaxParallel = *mp
			}
		case "scope":
			s.Scope = d.scope(v, field)
		case "timeout":
			s.Timeout = d.duration(v, field)
		case "placement_timeout":
			s.PlacementTimeout = d.duration(v, field)
		case "budget":
			s.Budget = d.budget(v, field)
		case "tasks":
			s.Tasks = d.tasks(v, field)
		case "publish":
			s.Publish = d.publish(v, field)
		}
	})
}

func (d decoder) tasks(n *yaml.Node, field string) []Task {
	items, ok := d.list(n, field, "a list of tasks")
	if !ok {
		return nil
	}
	if len(items) > MaxTasks {
		unit := "tasks"
		if d.wire {
			unit = "entries" // as every list of the wire form says it
		}
		d.fail(n, field, "%d %s; the limit is %d", len(items), unit, MaxTasks)
		return nil
	}
	tasks := make([]Task, len(items))
	for i, item := range items {
		f := fmt.Sprintf("%s[%d]", field, i)
		d.mark(f, item)
		if item.Kind != yaml.MappingNode {
			what := "a task must be"
			if d.wire {
				what = "must be"
			}
			d.fail(item, f, "%s a mapping with id and prompt, got %s", what, describe(item))
			continue
		}
		d.task(item, f, &tasks[i])
	}
	return tasks
}

func (d decoder) task(n *yaml.Node, path string, t *Task) {
	d.fields(n, path, d.known(taskFields, taskWireFields), func(key, field string, v *yaml.Node) {
		switch key {
		case "id":
			t.ID, _ = d.str(v, field)
		case "prompt":
			t.Prompt, _ = d.str(v, field)
		case "depends_on":
			t.DependsOn = d.strs(v, field, "a list of task ids, like [a, b]", MaxTasks)
		case "runtime":
			d.runtime(v, field, &t.Runtime, &t.Model, &t.Args)
		case "model": // the wire form's
			t.Model, _ = d.str(v, field)
		case "args": // the wire form's
			t.Args = d.strs(v, field, "a list of arguments", MaxArgs)
		case "validator":
			t.Validator = d.validator(v, field)
		case "review":
			t.Review = d.boolean(v, field)
		case "retry":
			t.Retry = d.retry(v, field)
		case "timeout":
			t.Timeout = d.duration(v, field)
		case "placement_timeout":
			t.PlacementTimeout = d.duration(v, field)
		case "verify":
			t.Verify = d.verify(v, field)
		case "verify_timeout":
			t.VerifyTimeout = d.duration(v, field)
		case "scope":
			t.Scope = d.scope(v, field)
		case "budget":
			t.Budget = d.budget(v, field)
		}
	})
}

// runtime decodes the runtime of a spec or a task into its name, model and
// args: in a file, a runtimeRef; on the wire, a name (model and args are
// fields of their own).
func (d decoder) runtime(n *yaml.Node, field string, name, model *string, args *[]string) {
	if d.wire {
		*name, _ = d.str(n, field)
		return
	}
	ref := d.runtimeRef(n, field)
	*name, *model, *args = ref.Name, ref.Model, ref.Args
}

// runtimeRef decodes a runtime written as a name or as a mapping with name,
// model and args; null reads as no runtime. For the mapping form it moves
// field's position to the name, which the checks of the name point at.
func (d decoder) runtimeRef(n *yaml.Node, field string) RuntimeRef {
	var ref RuntimeRef
	switch n.Kind {
	case yaml.ScalarNode:
		ref.Name, _ = d.str(n, field)
		return ref
	case yaml.MappingNode:
	default:
		d.fail(n, field, "must be a runtime name or a mapping with name, model and args, got %s", describe(n))
		return ref
	}
	ref, name, nameOK := d.runtimeMapping(n, field)
	switch {
	case name == nil:
		d.fail(n, field, "a runtime mapping needs a name (the runtime to run; model and args are optional)")
	case !nameOK:
		d.p.bad[field] = true // the name's problem is reported; a missing runtime would only repeat it
	case ref.Name == "":
		d.fail(name, field+".name", "required: the runtime to run")
		d.p.bad[field] = true
	default:
		d.mark(field, name)
	}
	return ref
}

// runtimeMapping decodes the fields of a runtime written as a mapping,
// returning with it the node of its name (nil without one) and whether
// that was a string.
func (d decoder) runtimeMapping(n *yaml.Node, field string) (ref RuntimeRef, name *yaml.Node, nameOK bool) {
	d.fields(n, field, runtimeFields, func(key, f string, v *yaml.Node) {
		switch key {
		case "name":
			name = v
			ref.Name, nameOK = d.str(v, f)
		case "model":
			ref.Model, _ = d.str(v, f)
		case "args":
			ref.Args = d.strs(v, f, "a list of arguments", MaxArgs)
		}
	})
	return ref, name, nameOK
}

// validator decodes a validator runtime; null or an empty name reads as
// unset. On the wire it is a mapping, null reading as unset.
func (d decoder) validator(n *yaml.Node, field string) *RuntimeRef {
	if d.wire {
		if !d.mapping(n, field, "a mapping with name, model and args") {
			return nil
		}
		ref, _, _ := d.runtimeMapping(n, field)
		return &ref
	}
	ref := d.runtimeRef(n, field)
	if d.p.bad[field] || ref.Name == "" && ref.Model == "" && ref.Args == nil {
		return nil
	}
	return &ref
}

// retry decodes a retry policy; null reads as unset.
func (d decoder) retry(n *yaml.Node, field string) *RetrySpec {
	if !d.mapping(n, field, "a mapping like {max_attempts: 3, fallback: [codex]}") {
		return nil
	}
	r := &RetrySpec{}
	d.fields(n, field, retryFields, func(key, f string, v *yaml.Node) {
		switch key {
		case "max_attempts":
			r.MaxAttempts = d.integer(v, f)
		case "initial_backoff":
			r.InitialBackoff = d.durationPtr(v, f)
		case "coefficient":
			r.Coefficient = d.float(v, f)
		case "max_backoff":
			r.MaxBackoff = d.durationPtr(v, f)
		case "jitter":
			r.Jitter = d.float(v, f)
		case "retry_on":
			for _, c := range d.strs(v, f, "a list of error classes, like [RATE_LIMITED]", MaxRetryOn) {
				r.RetryOn = append(r.RetryOn, drovertype.ErrorClass(c))
			}
		case "fallback":
			r.Fallback = d.strs(v, f, "a list of runtimes, like [codex, gemini]", MaxFallback)
		case "rate_limit_wait":
			r.RateLimitWait = d.durationPtr(v, f)
		}
	})
	return r
}

// scope decodes a scope; null reads as unset, while an empty mapping is a
// scope that allows everything (on a task, it lifts the flow's scope).
func (d decoder) scope(n *yaml.Node, field string) *Scope {
	if !d.mapping(n, field, "a mapping like {allow: [src/**], deny: [src/gen/**]}") {
		return nil
	}
	sc := &Scope{}
	d.fields(n, field, scopeFields, func(key, f string, v *yaml.Node) {
		globs := d.strs(v, f, "a list of globs, like [src/**, docs/*.md]", MaxGlobs)
		switch key {
		case "allow":
			if v.Kind == yaml.SequenceNode && len(v.Content) == 0 {
				// With no allow list every path is allowed: surely not what
				// an explicitly empty one means.
				d.fail(v, f, "an empty allow list would allow every path; list at least one glob or leave allow out")
			}
			sc.Allow = globs
		case "deny":
			sc.Deny = globs
		}
	})
	return sc
}

// budget decodes a budget; null reads as unset.
func (d decoder) budget(n *yaml.Node, field string) *Budget {
	if !d.mapping(n, field, "a mapping like {tokens: 2000000, cost_usd: 25}") {
		return nil
	}
	b := &Budget{}
	d.fields(n, field, budgetFields, func(key, f string, v *yaml.Node) {
		switch key {
		case "tokens":
			if c := d.count(v, f); c != nil {
				b.Tokens = *c
			}
		case "cost_usd":
			if c := d.float(v, f); c != nil {
				b.CostUSD = *c
			}
		case "running":
			b.Running, _ = d.str(v, f)
		}
	})
	return b
}

// count decodes a YAML integer that may need 64 bits; null reads as unset.
func (d decoder) count(n *yaml.Node, field string) *int64 {
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!null":
			return nil
		case "!!int":
			var v int64
			if err := n.Decode(&v); err == nil {
				return &v
			}
			d.fail(n, field, "number %.40s is out of range", n.Value)
			return nil
		}
	}
	d.fail(n, field, "must be a whole number, got %s", d.describeValue(n))
	return nil
}

// verify decodes verification commands: a list of strings, or one string
// for a single command. Null and [] read as nil.
func (d decoder) verify(n *yaml.Node, field string) []string {
	if d.wire {
		return d.strs(n, field, "a list of shell commands", MaxVerify)
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() != "!!null" {
		s, ok := d.str(n, field)
		if !ok {
			return nil
		}
		return []string{s}
	}
	return d.strs(n, field, "a list of shell commands, or one command", MaxVerify)
}

// mapping reports whether n is a mapping, reporting anything else but null.
func (d decoder) mapping(n *yaml.Node, field, want string) bool {
	switch {
	case n.Kind == yaml.MappingNode:
		return true
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null":
		return false
	default:
		d.fail(n, field, "must be %s, got %s", want, describe(n))
		return false
	}
}

// strs decodes a list of strings of at most max entries. It returns nil
// rather than an empty slice, as ids does.
func (d decoder) strs(n *yaml.Node, field, want string, max int) []string {
	items, ok := d.list(n, field, want)
	if !ok || len(items) == 0 {
		return nil
	}
	if len(items) > max {
		d.fail(n, field, "%d entries; the limit is %d", len(items), max)
		return nil
	}
	out := make([]string, len(items))
	for i, item := range items {
		f := fmt.Sprintf("%s[%d]", field, i)
		d.mark(f, item)
		out[i], _ = d.str(item, f)
	}
	return out
}

// boolean decodes a YAML boolean; null reads as unset. Strings such as
// "yes" are refused: YAML 1.2 does not read them as booleans, and guessing
// would make `review: "false"` mean true or false depending on the reader.
func (d decoder) boolean(n *yaml.Node, field string) *bool {
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!null":
			return nil
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err == nil {
				return &b
			}
		}
	}
	d.fail(n, field, "must be true or false, got %s", d.describeValue(n))
	return nil
}

// integer decodes a YAML integer; null reads as unset. Values beyond 32
// bits are refused here, so every check after it sees the number written.
func (d decoder) integer(n *yaml.Node, field string) *int {
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!null":
			return nil
		case "!!int":
			var v int64
			if err := n.Decode(&v); err == nil && v >= math.MinInt32 && v <= math.MaxInt32 {
				i := int(v)
				return &i
			}
			d.fail(n, field, "number %.40s is out of range", n.Value)
			return nil
		}
	}
	d.fail(n, field, "must be a whole number, got %s", d.describeValue(n))
	return nil
}

// float decodes a YAML integer or float; null reads as unset. Infinities
// and NaN pass here and fail the range checks of validation.
func (d decoder) float(n *yaml.Node, field string) *float64 {
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!null":
			return nil
		case "!!int", "!!float":
			if v, err := d.number(n); err == nil {
				return &v
			}
			d.fail(n, field, "number %.40s is out of range", n.Value)
			return nil
		}
	}
	d.fail(n, field, "must be a number, got %s", d.describeValue(n))
	return nil
}

// number reads a number node as its form does: YAML's way in a file,
// JSON's on the wire (where 99999999999999999999 is a number, not
// beyond int64).
func (d decoder) number(n *yaml.Node) (float64, error) {
	if d.wire {
		return strconv.ParseFloat(n.Value, 64)
	}
	var v float64
	err := n.Decode(&v)
	return v, err
}

// durationPtr decodes a duration; null and "" read as unset.
func (d decoder) durationPtr(n *yaml.Node, field string) *Duration {
	s, ok := d.str(n, field)
	if !ok || s == "" {
		return nil
	}
	v, err := parseDuration(s)
	if err != nil {
		d.fail(n, field, "%v", err)
		return nil
	}
	return &v
}

// fields walks the key/value pairs of mapping n at path, calling set for
// each known key and reporting unknown, repeated and non-string keys.
func (d decoder) fields(n *yaml.Node, path string, known []string, set func(key, field string, v *yaml.Node)) {
	seen := make(map[string]int, len(known)) // key -> line
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.fail(k, path, "field names must be plain strings, got %s", describe(k))
			continue
		}
		field := joinField(path, k.Value)
		if !slices.Contains(known, k.Value) {
			hint := fieldHints[k.Value]
			if d.wire {
				hint = "" // the hints show a file's form
			}
			d.fail(k, field, "unknown field (known fields: %s)%s", strings.Join(known, ", "), hint)
			continue
		}
		if line, dup := seen[k.Value]; dup {
			where := ""
			if line > 0 {
				where = fmt.Sprintf(" (first at line %d)", line)
			}
			d.fail(k, field, "field is set twice%s", where)
			continue
		}
		seen[k.Value] = k.Line
		d.mark(field, v)
		set(k.Value, field, v)
	}
}

// str decodes a scalar as a string; null reads as "". Numbers and booleans
// are taken as written, so `id: 1` is the id "1".
func (d decoder) str(n *yaml.Node, field string) (string, bool) {
	if n.Kind != yaml.ScalarNode || d.wire && n.Tag != "!!str" && n.Tag != "!!null" {
		d.fail(n, field, "must be a string, got %s", describe(n))
		return "", false
	}
	switch tag := n.ShortTag(); tag {
	case "!!null":
		return "", true
	case "!!str", "!!int", "!!float", "!!bool", "!!timestamp":
		return n.Value, true
	default:
		d.fail(n, field, "unsupported YAML tag %s; write a plain string", tag)
		return "", false
	}
}

func (d decoder) duration(n *yaml.Node, field string) Duration {
	s, ok := d.str(n, field)
	if !ok || s == "" {
		return 0
	}
	v, err := parseDuration(s)
	if err != nil {
		d.fail(n, field, "%v", err)
		return 0
	}
	return v
}

// list returns the items of a sequence node; null reads as an empty list.
func (d decoder) list(n *yaml.Node, field, want string) ([]*yaml.Node, bool) {
	switch {
	case n.Kind == yaml.SequenceNode:
		return n.Content, true
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null":
		return nil, true
	default:
		d.fail(n, field, "must be %s, got %s", want, describe(n))
		return nil, false
	}
}

// mark records where field was written, for problems found later.
func (d decoder) mark(field string, n *yaml.Node) {
	if d.p.pos != nil {
		d.p.pos[field] = position{n.Line, n.Column}
	}
}

// fail reports a problem at node n and marks field as bad, so validation
// does not report its consequences again.
func (d decoder) fail(n *yaml.Node, field, format string, args ...any) {
	d.p.bad[field] = true
	if len(d.p.errs) >= MaxProblems {
		d.p.more++
		return
	}
	d.p.record(&Error{File: d.p.file, Line: n.Line, Column: n.Column, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// describeValue is describe, followed by a number's or string's value, for
// fields that want a particular scalar: "got a string ("yes")". (A file's
// boolean too: YAML writes one in more ways than JSON.)
func (d decoder) describeValue(n *yaml.Node) string {
	desc := describe(n)
	if n.Kind == yaml.ScalarNode && n.ShortTag() != "!!null" && !(d.wire && n.Tag == "!!bool") {
		desc += fmt.Sprintf(" (%.40q)", n.Value)
	}
	return desc
}

// describe names the kind of a node for "got ..." messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias (*" + n.Value + "); anchors and aliases are not supported"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "nothing (null)"
		case "!!int", "!!float":
			return "a number"
		case "!!bool":
			return "a boolean"
		default:
			return "a string"
		}
	}
	return "an unexpected YAML node"
}

var plainKeyRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// joinField appends a key to a field path, quoting keys that would make the
// path ambiguous or unreadable (unknown keys are arbitrary user input).
func joinField(path, key string) string {
	if !plainKeyRE.MatchString(key) {
		key = fmt.Sprintf("%.40q", key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}
