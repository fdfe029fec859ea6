package flow

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ErrInvalid is wrapped by every validation error, so callers can test
// errors.Is(err, flow.ErrInvalid) (the CLI maps it to exit code 2).
var ErrInvalid = errors.New("flow: invalid flow")

// Error is one problem in a flow file. Line and Column are 1-based and 0 when
// unknown (always 0 for a Spec built in code).
type Error struct {
	File   string `json:"file,omitempty"`
	Line   int    `json:"line,omitempty"`
	Column int    `json:"column,omitempty"`
	Field  string `json:"field,omitempty"` // path like "tasks[1].depends_on[0]" or "name"; "" for the whole file
	Msg    string `json:"msg"`
}

// Error formats the problem as "FILE:LINE:COL: FIELD: MSG", leaving out the
// parts that are empty or zero, so editors can jump to it.
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
	}
	if e.Line > 0 {
		if b.Len() > 0 {
			b.WriteByte(':')
		}
		b.WriteString(strconv.Itoa(e.Line))
		if e.Column > 0 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(e.Column))
		}
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap makes every Error match errors.Is(err, ErrInvalid).
func (e *Error) Unwrap() error { return ErrInvalid }

// ValidationError holds the problems found in one flow, sorted by position.
// Parse and Validate return it whenever they find any problem; Errors is
// never empty.
type ValidationError struct {
	Errors []*Error
	// More counts problems found beyond MaxProblems and not recorded.
	More int
}

// MaxProblems bounds the problems recorded for one flow: a hostile file can
// hold hundreds of thousands, and nobody reads past the first screenful.
const MaxProblems = 100

// Error lists the problems one per line.
func (e *ValidationError) Error() string {
	var b strings.Builder
	for i, fe := range e.Errors {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(fe.Error())
	}
	if e.More > 0 {
		fmt.Fprintf(&b, "\n(and %d more problems)", e.More)
	}
	return b.String()
}

// Unwrap exposes each problem, so errors.As(err, &fe) with fe *Error finds
// the first one and errors.Is(err, ErrInvalid) holds.
func (e *ValidationError) Unwrap() []error {
	errs := make([]error, len(e.Errors))
	for i, fe := range e.Errors {
		errs[i] = fe
	}
	return errs
}

// newValidationError sorts errs by position (problems without a position keep
// their order, after those with one) and returns nil when there are none.
// more counts problems that were found but not recorded.
func newValidationError(errs []*Error, more int) error {
	if len(errs) == 0 {
		return nil
	}
	sort.SliceStable(errs, func(i, j int) bool {
		a, b := errs[i], errs[j]
		if (a.Line == 0) != (b.Line == 0) {
			return b.Line == 0
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	return &ValidationError{Errors: errs, More: more}
}
