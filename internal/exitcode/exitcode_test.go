package exitcode

import (
	"errors"
	"fmt"
	"testing"
)

func TestWithAndOf(t *testing.T) {
	base := errors.New("no task t")
	err := fmt.Errorf("logs: %w", With(NotFound, base))
	if code, ok := Of(err); !ok || code != NotFound {
		t.Errorf("Of = %d, %t", code, ok)
	}
	if !errors.Is(err, base) || err.Error() != "logs: no task t" {
		t.Errorf("the chain or text changed: %v", err)
	}
	if _, ok := Of(base); ok {
		t.Error("a plain error has a code")
	}
	if With(Usage, nil) != nil {
		t.Error("With(nil) is not nil")
	}
	// The outermost code wins: a command's own verdict over a wrapped one.
	if code, _ := Of(With(Usage, With(NotFound, base))); code != Usage {
		t.Errorf("outermost: %d", code)
	}
}
