package git

import (
	"strconv"
	"strings"
)

// IsHex reports whether s could be a (possibly abbreviated) object id: 4
// to 64 lower-case hex digits.
func IsHex(s string) bool {
	if len(s) < 4 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch b := s[i]; {
		case b >= '0' && b <= '9', b >= 'a' && b <= 'f':
		default:
			return false
		}
	}
	return true
}

// IsObjectID reports whether s is a full SHA-1 or SHA-256 object name.
func IsObjectID(s string) bool {
	return (len(s) == 40 || len(s) == 64) && IsHex(s)
}

// ShortID is an object id cut to 12 characters, for messages.
func ShortID(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// PlainBranch reports whether git certainly accepts branch as a branch name
// and takes it literally: only ASCII letters, digits and "._-/" (so nothing
// git expands, like @{-1}), and git's ref rules hold. False means "ask git"
// (`git check-ref-format --branch`), not "invalid": it also refuses some
// names git accepts.
func PlainBranch(branch string) bool {
	if branch == "" || branch == "HEAD" || strings.HasSuffix(branch, ".") || strings.Contains(branch, "..") {
		return false
	}
	for i := 0; i < len(branch); i++ {
		switch b := branch[i]; {
		case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9', b == '.', b == '_', b == '-', b == '/':
		default:
			return false
		}
	}
	for comp := range strings.SplitSeq(branch, "/") {
		if comp == "" || comp[0] == '.' || comp[0] == '-' || strings.HasSuffix(comp, ".lock") {
			return false
		}
	}
	return true
}

// gitAtLeast reports whether `git version` output v is major.minor or
// later ("git version 2.39.5", "git version 2.40.1.windows.1").
func gitAtLeast(v string, major, minor int) bool {
	f := strings.Fields(v)
	if len(f) < 3 {
		return false
	}
	parts := strings.SplitN(f[2], ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}
