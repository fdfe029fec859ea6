package forge

import (
	"errors"
	"fmt"
	"net/http"
)

// Sentinels a forge's errors match (errors.Is).
var (
	// ErrAuth: the forge refused the token (401, or 403 that is not a
	// rate limit). Trying again with the same token cannot help.
	ErrAuth = errors.New("forge: token refused")
	// ErrNotFound: the repository or pull request does not exist, or the
	// token may not see it.
	ErrNotFound = errors.New("forge: not found")
	// ErrRefused: the forge refused the request as it stands (a base
	// branch it does not have, a label it does not know): another try
	// would be refused the same way.
	ErrRefused = errors.New("forge: request refused")
)

// Error is a forge call that failed: which forge, what it was doing, the
// HTTP status when the forge answered (0 when it did not: a connection
// refused, a timeout), and why. Its message never holds the token.
type Error struct {
	Kind   Kind
	Op     string
	Status int
	// RateLimited: the forge answered that the token is over its rate
	// limit (GitHub's 403 or 429 with its rate-limit headers); transient.
	RateLimited bool
	Err         error
}

func (e *Error) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("forge: %s: %s: HTTP %d: %v", e.Kind, e.Op, e.Status, e.Err)
	}
	return fmt.Sprintf("forge: %s: %s: %v", e.Kind, e.Op, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes an Error match the sentinel its status means.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrAuth:
		return !e.RateLimited && (e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden)
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrRefused:
		return e.Status == http.StatusUnprocessableEntity || e.Status == http.StatusConflict ||
			e.Status == http.StatusBadRequest || e.Status == http.StatusMethodNotAllowed
	}
	return false
}

// Permanent reports whether err is a refusal that another try with the
// same request and token would meet again: refused credentials, a missing
// repository, a request the forge will not take. Anything else (no
// answer, a server error, a rate limit) is worth another try later.
func Permanent(err error) bool {
	return errors.Is(err, ErrAuth) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrRefused)
}
