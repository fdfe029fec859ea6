package config

import (
	"fmt"

	"github.com/drover-dev/drover/internal/tracing"
)

// validateTracing adds the tracing section's problems, each already naming
// its key (tracing.exporter, ...), as configuration errors.
func validateTracing(t tracing.Config, p *problems) {
	err := t.Validate()
	if err == nil {
		return
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			*p = append(*p, fmt.Errorf("%w: %w", ErrInvalid, e))
		}
		return
	}
	*p = append(*p, fmt.Errorf("%w: %w", ErrInvalid, err))
}
