//go:build !linux

package sandbox

import (
	"fmt"
	"os"
)

func (c *Confinement) ruleset() (*os.File, error) {
	return nil, fmt.Errorf("%w: Landlock is only available on Linux", ErrUnavailable)
}
