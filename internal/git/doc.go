// Package git is the one way Drover runs the system git binary, hardened
// once: every git command of the tree starts here (internal/codecheck fails
// on any other), whether it runs in a repo cache, in an attempt's checkout
// after an agent wrote to it, or in the agent's own repository.
//
// Every command runs with a minimal environment — PATH and HOME, the
// caller's extra variables, and settings of Drover's own: no system or
// global config, no system attributes, no replace objects, no terminal
// prompt, no lazy fetch, GIT_ALLOW_PROTOCOL limiting git to its own
// transports, a C locale so git's words can be read — and with `-c`
// settings that override whatever a repository's config says about
// programs git would run (hooks, fsmonitor, credential helpers, pagers,
// editors, external diffs, signing) or work it would start on its own (gc,
// maintenance). A command that names no git dir finds a repository only
// in its own directory (GIT_CEILING_DIRECTORIES), and only one that is not
// bare (safe.bareRepository=explicit): a `.git` removed or replaced by an
// agent can neither lead git up the tree to some other repository nor
// make a planted bare repository its own. Nothing else of Drover's
// environment (GIT_DIR, GIT_INDEX_FILE, GIT_AUTHOR_*) leaks into git.
//
// A failed command is an *Error with its arguments, its exit code and the
// tail of its stderr; output beyond a command's bound is ErrOutputTooLarge.
// The package also holds the rules of git's names that both the repo
// cache and the checkouts read (object ids, plain branch names).
//
// It must not know what the repositories are for: no caches, checkouts,
// attempts or agents. Callers say which git dir and work tree a command
// uses; a sandbox, when there is one, confines a command through the
// Confine hook the caller passes.
package git
