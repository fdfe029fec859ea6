package flow

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	yaml "go.yaml.in/yaml/v3"
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
//
// The wire form is read into the node tree a file is read into, and the
// one decoder (parse.go) fills the Spec from either, in wire mode for this
// one. The tree is built from jsontext's tokens, not by the YAML parser:
// JSON is YAML 1.2, but the YAML parser would also take what is not JSON,
// and refuse some of what is (an escaped surrogate pair).

// MaxJSONSize bounds the wire form of a flow. A file is at most MaxFileSize,
// but JSON escapes some characters a file holds as one byte in six
// (encoding/json writes '<' as \u003c), so the bound is six times as much.
const MaxJSONSize = 6 * MaxFileSize

// maxJSONValues bounds the values read into a tree: what the largest
// flow file can hold (a value and a separator at least), so that whatever
// Parse can accept is accepted on the wire while a hostile request of
// MaxJSONSize bytes does not become tens of millions of nodes.
const maxJSONValues = MaxFileSize / 2

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
	r := newJSONReader(data)
	switch k := r.dec.PeekKind(); k {
	case '{':
	case 0:
		_, err := r.dec.ReadToken()
		if err == nil {
			err = errors.New("unexpected token")
		}
		p.record(jsonError(err))
		return nil, p.err()
	case 'n':
		p.record(&Error{Msg: "the flow is null; send a mapping of fields (name, repo, tasks, ...)"})
		return nil, p.err()
	default:
		p.record(&Error{Msg: fmt.Sprintf("a flow must be a mapping of fields (name, repo, tasks, ...), got %s", JSONKindName(k))})
		return nil, p.err()
	}
	root, err := r.whole("more after the flow's mapping")
	if err != nil {
		p.record(jsonError(err))
		return nil, p.err()
	}
	s := &Spec{}
	decoder{p: p, wire: true}.spec(root, s)
	opts.Complete = true
	s.validate(p, opts)
	if err := p.err(); err != nil {
		return nil, err
	}
	return s, nil
}

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

// jsonReader reads JSON into a node tree the decoder walks as it walks a
// file's: strings tagged !!str, numbers !!int when written as whole
// numbers and !!float otherwise (as written: the decoder reads them), true
// and false !!bool, null !!null. The nodes have no lines.
type jsonReader struct {
	dec    *jsontext.Decoder
	values int
	limit  int // of values: maxJSONValues
}

func newJSONReader(data []byte) *jsonReader {
	return &jsonReader{dec: jsontext.NewDecoder(bytes.NewReader(data),
		jsontext.AllowDuplicateNames(true), // reported as a field set twice, by name
	), limit: maxJSONValues}
}

// errTooManyValues is returned by value for more values than its limit.
var errTooManyValues = fmt.Errorf("flow: more than %d values; a flow file of %d bytes holds fewer", maxJSONValues, MaxFileSize)

// value reads the next value into a node.
func (r *jsonReader) value() (*yaml.Node, error) {
	if r.values++; r.values > r.limit {
		return nil, errTooManyValues
	}
	tok, err := r.dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch k := tok.Kind(); k {
	case '{', '[':
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		end := jsontext.Kind('}')
		if k == '[' {
			n.Kind, n.Tag, end = yaml.SequenceNode, "!!seq", ']'
		}
		for r.dec.PeekKind() != end {
			v, err := r.value() // a member's name first, in an object
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, v)
		}
		_, err := r.dec.ReadToken()
		return n, err
	case '"':
		return &yaml.Node{Kind: yaml.ScalarNode, Style: yaml.DoubleQuotedStyle, Tag: "!!str", Value: tok.String()}, nil
	case '0':
		tag, text := "!!int", tok.String()
		if strings.ContainsAny(text, ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: text}, nil
	case 't', 'f':
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: tok.String()}, nil
	default: // 'n': the decoder reports any other kind
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	}
}

// whole reads the next value, which must be the last: more than white
// space after it is refused with more.
func (r *jsonReader) whole(more string) (*yaml.Node, error) {
	n, err := r.value()
	if err != nil {
		return nil, err
	}
	switch _, err := r.dec.ReadToken(); {
	case err == nil:
		return nil, errors.New(more)
	case !errors.Is(err, io.EOF):
		return nil, err
	}
	return n, nil
}

// jsonError turns what the reader refused into a problem.
func jsonError(err error) *Error {
	if errors.Is(err, errTooManyValues) {
		return &Error{Msg: strings.TrimPrefix(err.Error(), "flow: ")}
	}
	return &Error{Msg: "invalid JSON: " + strings.TrimPrefix(err.Error(), "jsontext: ")}
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
