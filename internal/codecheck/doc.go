// Package codecheck holds tests of rules that the module's code keeps as a
// whole, so they stay true: no function in internal/ or cmd/ runs longer than
// maxFuncLines, no binary under cmd/ links package testing (test support
// lives in packages of its own, such as adapter/adaptertest), git is started
// only by internal/git, hardened (git_test.go says where else, and why), the
// event schema depends on no package that decides (layers_test.go), and
// every docs/FILE.md#section the code names is a section the docs have.
//
// It has no code of its own and nothing may import it.
package codecheck
