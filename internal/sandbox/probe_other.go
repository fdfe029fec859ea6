//go:build !linux

package sandbox

import "errors"

// Probe reports no Landlock: it is Linux's.
func Probe() Support {
	return Support{Err: errors.New("Landlock is only available on Linux")}
}
