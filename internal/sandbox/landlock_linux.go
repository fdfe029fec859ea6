//go:build linux

package sandbox

import (
	"fmt"
	"os"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Access rights by kind of rule, before intersecting with what the ABI
// handles.
const (
	rightsRead  = ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir
	rightsWrite = rightsRead | ll.AccessFSWriteFile | ll.AccessFSRemoveDir | ll.AccessFSRemoveFile |
		ll.AccessFSMakeChar | ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSock |
		ll.AccessFSMakeFifo | ll.AccessFSMakeBlock | ll.AccessFSMakeSym | ll.AccessFSRefer |
		ll.AccessFSTruncate
	rightsReadFile  = ll.AccessFSExecute | ll.AccessFSReadFile
	rightsWriteFile = ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate
	rightsDevice    = ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev
)

// handledFS is every file system right an ABI can restrict: all of them
// are, so whatever no rule grants is denied.
func handledFS(abi int) landlock.AccessFSSet {
	n := map[int]int{1: 13, 2: 14, 3: 15, 4: 15, 5: 16, 6: 16, 7: 16, 8: 16}[abi]
	if n == 0 {
		n = 17 // ABI 9 and later: resolving unix sockets by path
	}
	return landlock.AccessFSSet(1<<n - 1)
}

// config is the ruleset's handled rights: every file system right, TCP
// connect and bind, and from ABI 6 signals and abstract unix sockets. UDP
// (ABI 10) is not handled: DNS needs it, and Landlock cannot tell a
// resolver from anything else (docs/security.md).
func (c *Confinement) config() landlock.Config {
	abi := c.sb.support.ABI
	cfg := landlock.Config{
		HandledAccessFS:  handledFS(abi),
		HandledAccessNet: ll.AccessNetBindTCP | ll.AccessNetConnectTCP,
	}
	if abi >= 6 {
		cfg.Scoped = ll.ScopeAbstractUnixSocket | ll.ScopeSignal
	}
	return cfg
}

func (k kind) rights() landlock.AccessFSSet {
	switch k {
	case readDir:
		return rightsRead
	case writeDir:
		return rightsWrite
	case readFile:
		return rightsReadFile
	case writeFile:
		return rightsWriteFile | ll.AccessFSExecute
	case device:
		return rightsDevice
	}
	return 0
}

// ruleset makes a Landlock ruleset of c's rules. A path that vanished
// since Compile is skipped: a rule cannot be added for it, and nothing is
// granted there.
func (c *Confinement) ruleset() (*os.File, error) {
	cfg := c.config()
	rules := make([]landlock.Rule, 0, len(c.rules)+len(c.connect)+len(c.bind))
	for _, r := range c.rules {
		if a := r.kind.rights() & cfg.HandledAccessFS; a != 0 {
			rules = append(rules, landlock.PathAccess(a, r.path).IgnoreIfMissing())
		}
	}
	for _, p := range c.connect {
		rules = append(rules, landlock.ConnectTCP(p))
	}
	for _, p := range c.bind {
		rules = append(rules, landlock.BindTCP(p))
	}
	fd, _, err := cfg.NewRulesetFD(rules...)
	if err != nil {
		return nil, fmt.Errorf("sandbox: landlock ruleset: %w", err)
	}
	if fd < 0 {
		return nil, fmt.Errorf("sandbox: landlock ruleset: nothing to restrict")
	}
	return os.NewFile(uintptr(fd), "landlock-ruleset"), nil
}
