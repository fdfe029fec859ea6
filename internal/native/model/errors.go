package model

import (
	"fmt"
	"time"
)

// Kind says what a failed call means for the loop.
type Kind string

// Kinds of failure.
const (
	// KindRateLimited: the provider throttles the key (HTTP 429, or a
	// rate-limit error in the stream). Not retried inside the attempt: the
	// task's policy falls back to another runtime or waits RetryAfter.
	KindRateLimited Kind = "rate_limited"
	// KindAuth: the key is missing, refused or lacks permission (401, 403).
	KindAuth Kind = "auth"
	// KindTransient: the provider or the network failed in a way that a
	// second try may not (5xx, overloaded, a connection reset, a stream cut
	// short). Retried inside the attempt a bounded number of times.
	KindTransient Kind = "transient"
	// KindRequest: the provider refused the request itself (400, 404,
	// 413, 422: a bad model name, a conversation over the context window).
	// Trying again changes nothing.
	KindRequest Kind = "request"
	// KindMalformed: the stream could not be read as the protocol says.
	KindMalformed Kind = "malformed"
)

// Error is a failed call, classified. Providers return it for every failure
// except the caller's own cancellation.
type Error struct {
	Kind     Kind
	Provider string
	Status   int    // HTTP status, 0 when the failure came inside a stream or before a response
	Type     string // the provider's own error type or code, e.g. "overloaded_error"
	Message  string
	// RetryAfter is how long the provider asked to wait (Retry-After and
	// its variants); ResetAt is when it says a limit resets. Either may be
	// zero.
	RetryAfter time.Duration
	ResetAt    time.Time
	Err        error // the SDK's error, for errors.As
}

func (e *Error) Error() string {
	s := e.Provider + ": " + string(e.Kind)
	if e.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	if e.Type != "" {
		s += " " + e.Type
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// KindOfStatus classifies an HTTP status the way every provider's
// documentation does: 429 throttles, 401/403 refuse the key, 408, 409 and
// 5xx (529 is Anthropic's "overloaded") are worth another try, the rest of
// 4xx is the request's fault.
func KindOfStatus(status int) Kind {
	switch {
	case status == 429:
		return KindRateLimited
	case status == 401 || status == 403:
		return KindAuth
	case status == 408 || status == 409 || status >= 500:
		return KindTransient
	case status >= 400:
		return KindRequest
	}
	return KindMalformed // a non-error status that still failed: the body was not what the protocol says
}
