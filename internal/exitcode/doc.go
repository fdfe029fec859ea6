// Package exitcode is the one table of exit codes of Drover's CLIs: every
// command of cmd/controller and cmd/worker exits with one of these, as
// docs/cli.md documents. A command that knows what kind of failure it has
// (a flow that failed, a task that does not exist) says so with With; each
// main maps the rest, the errors of Drover's packages, in one function
// that Run calls.
//
// It must not know the errors of any other package.
package exitcode
