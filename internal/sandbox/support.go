package sandbox

import (
	"errors"
	"fmt"
	"strings"
)

// MinABI is the lowest Landlock ABI the sandbox confines with: 2 makes
// renames across directories possible (git needs them), 3 lets it deny
// truncating files it may only read, 4 limits TCP. Below it the sandbox is
// unavailable, never weaker.
const MinABI = 4

// ErrUnavailable is wrapped by every reason the sandbox cannot confine here.
var ErrUnavailable = errors.New("sandbox: unavailable")

// Support is what the running kernel offers.
type Support struct {
	// ABI is the Landlock ABI version, 0 when the kernel has no Landlock
	// or it is disabled.
	ABI int
	// Err says why ABI is 0, when the kernel said.
	Err error
}

// Prober reports what the kernel offers; Probe is the real one, tests
// inject others.
type Prober func() Support

// Usable returns nil when processes can be confined, else why not,
// wrapping ErrUnavailable.
func (s Support) Usable() error {
	switch {
	case s.ABI == 0 && s.Err != nil:
		return fmt.Errorf("%w: this kernel has no Landlock (%v)", ErrUnavailable, s.Err)
	case s.ABI == 0:
		return fmt.Errorf("%w: this kernel has no Landlock", ErrUnavailable)
	case s.ABI < MinABI:
		return fmt.Errorf("%w: Landlock ABI %d is too old: %s", ErrUnavailable, s.ABI, missing(s.ABI))
	}
	return nil
}

// missing names what an ABI below MinABI lacks.
func missing(abi int) string {
	switch {
	case abi < 2:
		return "no renames across directories (ABI 2), no truncate control (ABI 3), no TCP control (ABI 4); need Linux 6.7 or later"
	case abi < 3:
		return "no truncate control (ABI 3), no TCP control (ABI 4); need Linux 6.7 or later"
	default:
		return "no TCP control (ABI 4); need Linux 6.7 or later"
	}
}

// String says what the sandbox enforces here, e.g. "landlock ABI 7", or
// what it lacks.
func (s Support) String() string {
	if err := s.Usable(); err != nil {
		return "unavailable: " + Reason(err)
	}
	out := fmt.Sprintf("landlock ABI %d", s.ABI)
	var gaps []string
	if s.ABI < 5 {
		gaps = append(gaps, "ioctl on devices not limited (ABI 5)")
	}
	if s.ABI < 6 {
		gaps = append(gaps, "signals and abstract unix sockets not scoped (ABI 6)")
	}
	if s.ABI < 9 {
		gaps = append(gaps, "unix sockets by path not limited (ABI 9)")
	}
	for i, g := range gaps {
		if i == 0 {
			out += ": "
		} else {
			out += ", "
		}
		out += g
	}
	return out
}

// Reason is err without the package's "sandbox: unavailable: " prefix, for
// messages that say "unavailable" themselves.
func Reason(err error) string {
	return strings.TrimPrefix(err.Error(), ErrUnavailable.Error()+": ")
}
