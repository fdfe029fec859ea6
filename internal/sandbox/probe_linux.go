//go:build linux

package sandbox

import (
	"errors"
	"syscall"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Probe asks the kernel for its Landlock ABI version, read as go-landlock
// reads it: an ABI of 6 or more whose signal scoping has a known bug
// (erratum 2 unfixed) counts as 5, and Compile asks for no more.
func Probe() Support {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		switch {
		case errors.Is(err, syscall.ENOSYS):
			err = errors.New("the kernel was built without it")
		case errors.Is(err, syscall.EOPNOTSUPP):
			err = errors.New("it is disabled at boot: add landlock to the lsm= kernel parameter")
		}
		return Support{Err: err}
	}
	if v >= 6 {
		if errata, err := ll.LandlockGetErrata(); err != nil || errata&0x2 == 0 {
			v = 5
		}
	}
	return Support{ABI: v}
}
