package drovertype

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxIDLen is the longest flow, task, pool or runtime id. 63 keeps an id
// usable as a DNS label, a Kubernetes name and one component of a branch
// name.
const MaxIDLen = 63

// ErrInvalidID is wrapped by every error about a malformed id.
var ErrInvalidID = errors.New("invalid id")

// ValidID reports whether s can be a flow, task, pool or runtime id,
// returning a descriptive error or nil. Ids become NATS subject tokens, git
// branch name components and file names, so they are limited to
// ^[A-Za-z0-9][A-Za-z0-9-]{0,62}$: no dots (subject separators, ".."), no
// slashes (paths, refs), no spaces, underscores (attempt ids join ids with
// them) or non-ASCII letters, and no leading dash (it would read as a
// command-line flag).
func ValidID(s string) error {
	if msg := idProblem(s); msg != "" {
		return &IDError{Problem: msg}
	}
	return nil
}

// IDError says what is wrong with an id, in words for people.
type IDError struct{ Problem string }

func (e *IDError) Error() string { return "invalid id: " + e.Problem }

func (e *IDError) Unwrap() error { return ErrInvalidID }

// idProblem describes what is wrong with s as an id, or returns "".
func idProblem(s string) string {
	if s == "" {
		return "id is empty"
	}
	if len(s) > MaxIDLen {
		return fmt.Sprintf("%.20q... is %d bytes long; the limit is %d", s, len(s), MaxIDLen)
	}
	if s[0] == '-' {
		return fmt.Sprintf("%q starts with '-'; an id must start with a letter or digit", s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' {
			continue
		}
		return fmt.Sprintf("%q contains %s; only ASCII letters, digits and '-' are allowed", s, describeByte(c))
	}
	return ""
}

// describeByte names an offending character for an error message.
func describeByte(c byte) string {
	switch {
	case c == ' ':
		return "a space"
	case c >= 0x80:
		return "a non-ASCII character"
	case c < 0x20 || c == 0x7f:
		return fmt.Sprintf("control character %#02x", c)
	default:
		return fmt.Sprintf("'%c'", c)
	}
}

// integrateTag marks the attempt ids of integration builds. A task's n-th
// attempt is "<flow>_<task>_<n>"; the n-th build of a flow's integration
// branch is "<flow>__integrate_<n>". Flow and task ids have no underscore,
// so an attempt id splits back unambiguously, and task ids are never empty,
// so "__" is never a task's.
const integrateTag = "_integrate"

// maxN bounds an attempt number: nine digits.
const maxN = 999_999_999

// AttemptID is the id of the n-th attempt of a task.
func AttemptID(flowID, task string, n int) string {
	return flowID + "_" + task + "_" + strconv.Itoa(n)
}

// IntegrationID is the id of the n-th build of a flow's integration branch.
func IntegrationID(flowID string, n int) string {
	return flowID + "_" + integrateTag + "_" + strconv.Itoa(n)
}

// ParseAttemptID splits an attempt id into its flow, task and number; task
// is "" for an integration build. Every part is checked: flow and task are
// valid ids, n is a number from 1 written without leading zeros.
func ParseAttemptID(id string) (flowID, task string, n int, err error) {
	bad := func(why string) (string, string, int, error) {
		return "", "", 0, fmt.Errorf("%w: %.80q is not an attempt id: %s", ErrInvalidID, id, why)
	}
	head, num, ok := cutLast(id, "_")
	if !ok {
		return bad("no attempt number")
	}
	if n, ok = parseN(num); !ok {
		return bad("the attempt number is not a number from 1")
	}
	flowID, task, ok = strings.Cut(head, "_")
	if !ok {
		return bad("no task")
	}
	switch {
	case ValidID(flowID) != nil:
		return bad("the flow is not a valid id")
	case task == integrateTag:
		task = "" // an integration build
	case ValidID(task) != nil:
		return bad("the task is not a valid id")
	}
	return flowID, task, n, nil
}

// AttemptBranch is the git branch an attempt's result is pushed to.
func AttemptBranch(flowID, task string, n int) string {
	return "drover/" + flowID + "/" + task + "/" + strconv.Itoa(n)
}

// IntegrationBranch collects a flow's succeeded tasks, merged in order. A
// flow reopened by an operator retry builds a new one (integration-2, ...):
// branches are never force-pushed.
func IntegrationBranch(flowID string, n int) string {
	if n <= 1 {
		return "drover/" + flowID + "/integration"
	}
	return "drover/" + flowID + "/integration-" + strconv.Itoa(n)
}

// ParseIntegrationBranch returns n when b is IntegrationBranch(flowID, n).
func ParseIntegrationBranch(flowID, b string) (n int, ok bool) {
	rest, ok := strings.CutPrefix(b, "drover/"+flowID+"/integration")
	switch {
	case !ok:
		return 0, false
	case rest == "":
		return 1, true
	}
	num, ok := strings.CutPrefix(rest, "-")
	if !ok {
		return 0, false
	}
	if n, ok = parseN(num); !ok || n < 2 {
		return 0, false
	}
	return n, true
}

// ParseAttemptBranch returns the task and attempt number of b when b is
// AttemptBranch(flowID, task, n) for a valid task id and some n.
func ParseAttemptBranch(flowID, b string) (task string, n int, ok bool) {
	rest, ok := strings.CutPrefix(b, "drover/"+flowID+"/")
	if !ok {
		return "", 0, false
	}
	task, num, ok := strings.Cut(rest, "/")
	if !ok || ValidID(task) != nil {
		return "", 0, false
	}
	n, ok = parseN(num)
	return task, n, ok
}

// parseN reads an attempt number as AttemptID writes it.
func parseN(s string) (int, bool) {
	if s == "" || len(s) > 9 || s[0] == '0' {
		return 0, false
	}
	// Digits only: Atoi also takes a sign ("+1"), which AttemptID never
	// writes, and an id must have one spelling.
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 1 && n <= maxN
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// Event ids. Every event's id is "<type>:<key>": the key is what makes the
// event unique among those of its type — an attempt for the controller's
// decisions about it, an attempt and a claim's epoch for what a worker
// reports of one claim, random for an operator's request. Decisions made
// again after a restart get the same id, and the fold counts them once.

// MaxEventIDLen bounds an event id.
const MaxEventIDLen = 512

// EventID is the id of the event of type typ about key.
func EventID[T ~string](typ T, key string) string { return string(typ) + ":" + key }

// ClaimEventID is the id of an event of type typ that the holder of an
// attempt's claim at epoch reports; extra (a number or a digest) tells
// apart several events of one type in one claim.
func ClaimEventID[T ~string](typ T, attempt string, epoch uint64, extra ...string) string {
	id := string(typ) + ":" + attempt + ":" + strconv.FormatUint(epoch, 10)
	for _, x := range extra {
		id += ":" + x
	}
	return id
}

// ParseEventID splits an event id into its type and key.
func ParseEventID(id string) (typ, key string, err error) {
	if id == "" || len(id) > MaxEventIDLen {
		return "", "", fmt.Errorf("%w: an event id of %d bytes", ErrInvalidID, len(id))
	}
	typ, key, ok := strings.Cut(id, ":")
	if !ok || typ == "" || key == "" {
		return "", "", fmt.Errorf("%w: event id %.80q is not TYPE:KEY", ErrInvalidID, id)
	}
	return typ, key, nil
}
