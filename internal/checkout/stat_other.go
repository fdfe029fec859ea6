//go:build !linux

package checkout

import "io/fs"

// statKey is empty where Drover does not read the platform's stat: every
// snapshot then hashes every file.
type statKey struct{}

func statOf(fs.FileInfo) statKey { return statKey{} }

func (statKey) known() bool { return false }
