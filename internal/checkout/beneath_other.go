//go:build !linux

package checkout

import "errors"

// readBeneath cannot read safely without openat2: the caller asks git.
func readBeneath(root, rel string, max int) ([]byte, error) {
	return nil, errNoOpenat2
}

var errNoOpenat2 = errors.New("checkout: no openat2 on this platform")
