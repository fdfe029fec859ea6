package config

import (
	"fmt"

	"github.com/drover-dev/drover/internal/tracing"
)

// validateTracing adds the tracing section's problems, each already naming
// its key (tracing.exporter, ...), as configuration errors.
func validateTracing(t tracing.Config, errs *[]error) {
	err := t.Validate()
	if err == nil {
		return
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			*errs = append(*errs, fmt.Errorf("%w: %w", ErrInvalid, e))
		}
		return
	}
	*errs = append(*errs, fmt.Errorf("%w: %w", ErrInvalid, err))
}
