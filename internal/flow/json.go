package flow

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/drover-dev/drover/internal/drovertype"
)

// The wire form of a flow is a Spec's JSON: what `controller submit` sends
// once Parse has read the file, and what the controller's submit and
// resolve APIs receive. The API is open to any client of the operator
// role, so DecodeJSON reads it as strictly as Parse reads a file: the same
// fields (with the model and arguments of a runtime beside its name, as the
// Spec has them), each with its type, no field unknown or set twice, the
// same limits and the same validation, each problem naming its field with
// Parse's words. JSON has no lines worth pointing at (the CLI writes one),
// so problems carry the field only.

// MaxJSONSize bounds the wire form of a flow. A file is at most MaxFileSize,
// but JSON escapes some characters a file holds as one byte in six
// (encoding/json writes '<' as \u003c), so the bound is six times as much.
const MaxJSONSize = 6 * MaxFileSize

// JSON names of the wire form's fields, in the Spec's order.
var (
	specJSONFields = []string{"name", "repo", "base", "project", "runtime", "model", "args", "validator", "review",
		"retry", "max_parallel", "scope", "timeout", "placement_timeout", "budget", "tasks", "publish"}
	taskJSONFields = []string{"id", "prompt", "depends_on", "runtime", "model", "args", "validator", "review", "retry",
		"timeout", "placement_timeout", "verify", "verify_timeout", "scope", "budget"}
)

// DecodeJSON decodes and validates the wire form of a flow. The spec must
// be complete as Parse leaves it (opts.Complete is implied): a base, and a
// local repo path made absolute. All problems are returned at once in a
// *ValidationError, which wraps ErrInvalid.
func DecodeJSON(data []byte, opts Options) (*Spec, error) {
	p := &problems{bad: map[string]bool{}}
	if len(data) > MaxJSONSize {
		p.record(&Error{Msg: fmt.Sprintf("flow is %d bytes of JSON; the limit is %d", len(data), MaxJSONSize)})
		return nil, p.err()
	}
	d := &jsonDecoder{p: p, dec: jsontext.NewDecoder(bytes.NewReader(data),
		jsontext.AllowDuplicateNames(true), // reported as a field set twice, by name
	)}
	s := &Spec{}
	switch d.peek() {
	case '{':
		d.spec(s)
	case 0: // not JSON: recorded
	case 'n':
		p.record(&Error{Msg: "the flow is null; send a mapping of fields (name, repo, tasks, ...)"})
		return nil, p.err()
	default:
		p.record(&Error{Msg: fmt.Sprintf("a flow must be a mapping of fields (name, repo, tasks, ...), got %s", d.describeNext())})
		return nil, p.err()
	}
	if d.broken == nil {
		switch _, err := d.dec.ReadToken(); {
		case err == nil:
			d.syntax(errors.New("more after the flow's mapping"))
		case !errors.Is(err, io.EOF):
			d.syntax(err)
		}
	}
	if d.broken != nil {
		return nil, p.err()
	}
	opts.Complete = true
	s.validate(p, opts)
	if err := p.err(); err != nil {
		return nil, err
	}
	return s, nil
}

// jsonDecoder fills a Spec from a JSON token stream, reporting type
// problems with the field at fault, as decoder does for a YAML node tree.
// A syntax error ends the decoding: nothing after it can be trusted.
type jsonDecoder struct {
	p      *problems
	dec    *jsontext.Decoder
	broken error
}

// syntax records that the input is not JSON, once.
func (d *jsonDecoder) syntax(err error) {
	if d.broken != nil {
		return
	}
	d.broken = err
	msg := strings.TrimPrefix(err.Error(), "jsontext: ")
	d.p.record(&Error{Msg: "invalid JSON: " + msg})
}

// fail reports a problem with field and marks it bad, so validation does
// not report its consequences again.
func (d *jsonDecoder) fail(field, format string, args ...any) {
	d.p.bad[field] = true
	if len(d.p.errs) >= MaxProblems {
		d.p.more++
		return
	}
	d.p.record(&Error{Field: field, Msg: fmt.Sprintf(format, args...)})
}

// peek returns the kind of the next token; 0 after a syntax error, which
// it records.
func (d *jsonDecoder) peek() jsontext.Kind {
	if d.broken != nil {
		return 0
	}
	k := d.dec.PeekKind()
	if k == 0 {
		_, err := d.dec.ReadToken()
		if err == nil {
			err = errors.New("unexpected token")
		}
		d.syntax(err)
	}
	return k
}

// skip consumes the next value, whatever it is.
func (d *jsonDecoder) skip() {
	if d.broken != nil {
		return
	}
	if err := d.dec.SkipValue(); err != nil {
		d.syntax(err)
	}
}

// describeNext names the kind of the next value for "got ..." messages,
// in Parse's words (describe).
func (d *jsonDecoder) describeNext() string { return JSONKindName(d.peek()) }

// JSONKindName names a JSON value's kind in the words of Parse's problems
// ("a mapping", "a list", ...): the API's checks of requests speak them too.
func JSONKindName(k jsontext.Kind) string {
	switch k {
	case '{':
		return "a mapping"
	case '[':
		return "a list"
	case 'n':
		return "nothing (null)"
	case '0':
		return "a number"
	case 't', 'f':
		return "a boolean"
	case '"':
		return "a string"
	}
	return "an unexpected JSON value"
}

// describeValue is describeNext, followed by a number's or string's value,
// for fields that want a particular scalar. It consumes the value.
func (d *jsonDecoder) describeValue() string {
	desc := d.describeNext()
	switch d.peek() {
	case '0', '"':
		tok, err := d.dec.ReadToken()
		if err != nil {
			d.syntax(err)
			return desc
		}
		return desc + fmt.Sprintf(" (%.40q)", tok.String())
	}
	d.skip()
	return desc
}

// object walks the members of the object at field, calling set for each
// known one (set must consume its value) and reporting unknown and
// repeated ones. It reports anything but an object, except null, which
// reads as an absent object when null is true.
func (d *jsonDecoder) object(field, want string, known []string, null bool, set func(key, f string)) bool {
	if d.broken != nil {
		return false
	}
	switch d.peek() {
	case '{':
	case 'n':
		if null {
			d.skip()
			return false
		}
		fallthrough
	case 0:
		return false
	default:
		d.fail(field, "must be %s, got %s", want, d.describeNext())
		d.skip()
		return false
	}
	if _, err := d.dec.ReadToken(); err != nil {
		d.syntax(err)
		return false
	}
	seen := make(map[string]bool, len(known))
	for d.broken == nil && d.peek() != '}' {
		tok, err := d.dec.ReadToken()
		if err != nil {
			d.syntax(err)
			return false
		}
		key := tok.String()
		f := joinField(field, key)
		switch {
		case !slices.Contains(known, key):
			d.fail(f, "unknown field (known fields: %s)", strings.Join(known, ", "))
			d.skip()
		case seen[key]:
			d.fail(f, "field is set twice")
			d.skip()
		default:
			seen[key] = true
			set(key, f)
		}
	}
	if d.broken == nil {
		if _, err := d.dec.ReadToken(); err != nil {
			d.syntax(err)
		}
	}
	return d.broken == nil
}

// list calls item for each element of the array at field (item must
// consume it), at most max of them; null reads as an empty list.
func (d *jsonDecoder) list(field, want string, max int, item func(i int, f string)) {
	if d.broken != nil {
		return
	}
	switch d.peek() {
	case '[':
	case 'n':
		d.skip()
		return
	case 0:
		return
	default:
		d.fail(field, "must be %s, got %s", want, d.describeNext())
		d.skip()
		return
	}
	if _, err := d.dec.ReadToken(); err != nil {
		d.syntax(err)
		return
	}
	n := 0
	for d.broken == nil && d.peek() != ']' {
		if n == max {
			// Count the rest without decoding it: the limit is what to say.
			for d.broken == nil && d.peek() != ']' {
				d.skip()
				n++
			}
			d.fail(field, "%d entries; the limit is %d", n, max)
			break
		}
		item(n, fmt.Sprintf("%s[%d]", field, n))
		n++
	}
	if d.broken == nil {
		if _, err := d.dec.ReadToken(); err != nil {
			d.syntax(err)
		}
	}
}

// str decodes a string; null reads as "".
func (d *jsonDecoder) str(field string) string {
	if d.broken != nil {
		return ""
	}
	switch d.peek() {
	case '"':
		tok, err := d.dec.ReadToken()
		if err != nil {
			d.syntax(err)
			return ""
		}
		return tok.String()
	case 'n':
		d.skip()
		return ""
	case 0:
		return ""
	}
	d.fail(field, "must be a string, got %s", d.describeNext())
	d.skip()
	return ""
}

// strs decodes a list of strings of at most max entries, nil when empty.
func (d *jsonDecoder) strs(field, want string, max int) []string {
	var out []string
	d.list(field, want, max, func(_ int, f string) { out = append(out, d.str(f)) })
	if d.p.bad[field] {
		return nil
	}
	return out
}

// boolean decodes true or false; null reads as unset.
func (d *jsonDecoder) boolean(field string) *bool {
	if d.broken != nil {
		return nil
	}
	switch d.peek() {
	case 't', 'f':
		tok, err := d.dec.ReadToken()
		if err != nil {
			d.syntax(err)
			return nil
		}
		b := tok.Bool()
		return &b
	case 'n':
		d.skip()
		return nil
	case 0:
		return nil
	}
	d.fail(field, "must be true or false, got %s", d.describeValue())
	return nil
}

// number reads the text of a JSON number; ok is false (after reporting)
// for anything else, and for null, which reads as unset.
func (d *jsonDecoder) number(field, want string) (text string, ok bool) {
	if d.broken != nil {
		return "", false
	}
	switch d.peek() {
	case '0':
		v, err := d.dec.ReadValue()
		if err != nil {
			d.syntax(err)
			return "", false
		}
		return string(v), true
	case 'n', 0:
		d.skip()
		return "", false
	}
	d.fail(field, "must be %s, got %s", want, d.describeValue())
	return "", false
}

// integer decodes a whole number within 32 bits; null reads as unset.
func (d *jsonDecoder) integer(field string) *int {
	text, ok := d.number(field, "a whole number")
	if !ok {
		return nil
	}
	v, err := strconv.ParseInt(text, 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange), err == nil && (v < math.MinInt32 || v > math.MaxInt32):
		d.fail(field, "number %.40s is out of range", text)
		return nil
	case err != nil:
		d.fail(field, "must be a whole number, got a number (%.40q)", text)
		return nil
	}
	i := int(v)
	return &i
}

// float decodes a number; null reads as unset.
func (d *jsonDecoder) float(field string) *float64 {
	text, ok := d.number(field, "a number")
	if !ok {
		return nil
	}
	v, err := strconv.ParseFloat(text, 64)
	if err != nil {
		d.fail(field, "number %.40s is out of range", text)
		return nil
	}
	return &v
}

// duration decodes a duration string; null and "" read as unset.
func (d *jsonDecoder) duration(field string) *Duration {
	s := d.str(field)
	if s == "" || d.p.bad[field] {
		return nil
	}
	v, err := parseDuration(s)
	if err != nil {
		d.fail(field, "%v", err)
		return nil
	}
	return &v
}

func (d *jsonDecoder) durationValue(field string) Duration {
	if v := d.duration(field); v != nil {
		return *v
	}
	return 0
}

func (d *jsonDecoder) spec(s *Spec) {
	d.object("", "a mapping of fields", specJSONFields, false, func(key, f string) {
		switch key {
		case "name":
			s.Name = d.str(f)
		case "repo":
			s.Repo = d.str(f)
		case "base":
			s.Base = d.str(f)
		case "project":
			s.Project = d.str(f)
		case "runtime":
			s.Runtime = d.str(f)
		case "model":
			s.Model = d.str(f)
		case "args":
			s.Args = d.strs(f, "a list of arguments", MaxArgs)
		case "validator":
			s.Validator = d.runtimeRef(f)
		case "review":
			s.Review = d.boolean(f)
		case "retry":
			s.Retry = d.retry(f)
		case "max_parallel":
			if mp := d.integer(f); mp != nil {
				s.MaxParallel = *mp
			}
		case "scope":
			s.Scope = d.scope(f)
		case "timeout":
			s.Timeout = d.durationValue(f)
		case "placement_timeout":
			s.PlacementTimeout = d.durationValue(f)
		case "budget":
			s.Budget = d.budget(f)
		case "tasks":
			d.list(f, "a list of tasks", MaxTasks, func(_ int, tf string) {
				s.Tasks = append(s.Tasks, Task{})
				d.task(tf, &s.Tasks[len(s.Tasks)-1])
			})
			if d.p.bad[f] {
				s.Tasks = nil
			}
		case "publish":
			s.Publish = d.publish(f)
		}
	})
}

func (d *jsonDecoder) task(field string, t *Task) {
	d.object(field, "a mapping with id and prompt", taskJSONFields, false, func(key, f string) {
		switch key {
		case "id":
			t.ID = d.str(f)
		case "prompt":
			t.Prompt = d.str(f)
		case "depends_on":
			t.DependsOn = d.strs(f, "a list of task ids, like [a, b]", MaxTasks)
		case "runtime":
			t.Runtime = d.str(f)
		case "model":
			t.Model = d.str(f)
		case "args":
			t.Args = d.strs(f, "a list of arguments", MaxArgs)
		case "validator":
			t.Validator = d.runtimeRef(f)
		case "review":
			t.Review = d.boolean(f)
		case "retry":
			t.Retry = d.retry(f)
		case "timeout":
			t.Timeout = d.durationValue(f)
		case "placement_timeout":
			t.PlacementTimeout = d.durationValue(f)
		case "verify":
			t.Verify = d.strs(f, "a list of shell commands", MaxVerify)
		case "verify_timeout":
			t.VerifyTimeout = d.durationValue(f)
		case "scope":
			t.Scope = d.scope(f)
		case "budget":
			t.Budget = d.budget(f)
		}
	})
}

// runtimeRef decodes a validator: {name, model, args}; null reads as unset.
func (d *jsonDecoder) runtimeRef(field string) *RuntimeRef {
	ref := &RuntimeRef{}
	if !d.object(field, "a mapping with name, model and args", runtimeFields, true, func(key, f string) {
		switch key {
		case "name":
			ref.Name = d.str(f)
		case "model":
			ref.Model = d.str(f)
		case "args":
			ref.Args = d.strs(f, "a list of arguments", MaxArgs)
		}
	}) || d.p.bad[field] {
		return nil
	}
	return ref
}

// retry decodes a retry policy; null reads as unset.
func (d *jsonDecoder) retry(field string) *RetrySpec {
	r := &RetrySpec{}
	if !d.object(field, "a mapping like {max_attempts: 3, fallback: [codex]}", retryFields, true, func(key, f string) {
		switch key {
		case "max_attempts":
			r.MaxAttempts = d.integer(f)
		case "initial_backoff":
			r.InitialBackoff = d.duration(f)
		case "coefficient":
			r.Coefficient = d.float(f)
		case "max_backoff":
			r.MaxBackoff = d.duration(f)
		case "jitter":
			r.Jitter = d.float(f)
		case "retry_on":
			for _, c := range d.strs(f, "a list of error classes, like [RATE_LIMITED]", MaxRetryOn) {
				r.RetryOn = append(r.RetryOn, drovertype.ErrorClass(c))
			}
		case "fallback":
			r.Fallback = d.strs(f, "a list of runtimes, like [codex, gemini]", MaxFallback)
		case "rate_limit_wait":
			r.RateLimitWait = d.duration(f)
		}
	}) {
		return nil
	}
	return r
}

// scope decodes a scope; null reads as unset, an empty mapping allows
// everything.
func (d *jsonDecoder) scope(field string) *Scope {
	sc := &Scope{}
	if !d.object(field, "a mapping like {allow: [src/**], deny: [src/gen/**]}", scopeFields, true, func(key, f string) {
		empty := d.peek() == '['
		globs := d.strs(f, "a list of globs, like [src/**, docs/*.md]", MaxGlobs)
		switch key {
		case "allow":
			if empty && globs == nil && !d.p.bad[f] {
				d.fail(f, "an empty allow list would allow every path; list at least one glob or leave allow out")
			}
			sc.Allow = globs
		case "deny":
			sc.Deny = globs
		}
	}) {
		return nil
	}
	return sc
}

// budget decodes a budget: {tokens, cost_usd, running}; null reads as
// unset.
func (d *jsonDecoder) budget(field string) *Budget {
	b := &Budget{}
	if !d.object(field, "a mapping like {tokens: 2000000, cost_usd: 25}", budgetFields, true, func(key, f string) {
		switch key {
		case "tokens":
			if text, ok := d.number(f, "a whole number"); ok {
				v, err := strconv.ParseInt(text, 10, 64)
				if err != nil {
					d.fail(f, "must be a whole number within 64 bits, got %.40s", text)
				}
				b.Tokens = v
			}
		case "cost_usd":
			if v := d.float(f); v != nil {
				b.CostUSD = *v
			}
		case "running":
			b.Running = d.str(f)
		}
	}) {
		return nil
	}
	return b
}

// checkComplete reports what a spec on the wire lacks that Parse fills in:
// its base, and an absolute path for a local repo (a relative one would be
// resolved against whichever directory a worker's git runs in).
func (s *Spec) checkComplete(p *problems) {
	if s.Base == "" {
		p.add("base", "required: the revision tasks start from (a flow file without one gets %s)", DefaultBase)
	}
	if s.Repo != "" && kindOf(s.Repo) == repoPath && !filepath.IsAbs(s.Repo) && repoProblem(s.Repo) == "" {
		p.add("repo", "local path %q is relative; send it absolute (controller submit does)", s.Repo)
	}
}
