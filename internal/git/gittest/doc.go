// Package gittest is test support for what drives git: it runs the system
// git as a user would, unhardened and without internal/git, to make the
// repositories a test starts from (an origin with a seed clone that
// pushes to it) and to plant what the hardened git must ignore.
//
// Only tests import it (internal/codecheck: no binary links package
// testing); it is, with _test.go files, the one place besides internal/git
// that may start git.
package gittest
