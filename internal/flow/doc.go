// Package flow owns the flow file format: the YAML a user submits to the
// controller, describing a DAG of tasks to run against one git repository.
//
// It parses a file into a Spec, validates it (ids, references, cycles,
// runtimes, retry policies, verification commands, scope globs, limits) and
// answers the questions the controller needs: topological order,
// dependents, the effective runtime and scope of a task, and whether a
// scope allows a path. Resolving policies across the task, flow, project
// and configuration levels is internal/policy's job.
//
// The package is pure: it never touches the network, git, NATS or the file
// system (Parse is handed the bytes; a local repo path is made absolute but
// not checked for existence). A Spec also travels inside events as JSON, so
// its JSON form is part of the wire format: change it only compatibly.
//
// The same Spec travels from `controller submit` to the controller's API as
// JSON: DecodeJSON reads that wire form as strictly as Parse reads a file
// (the same fields, types, limits and validation, the same words), since
// any client of the API may send it. Both go through one decoder, which
// walks a node tree: the YAML parser's for a file, one built from the JSON
// tokens for the wire form (json.go). Its field lists are written once;
// what the two forms do differently is in the decoder's wire mode.
//
// Every problem it reports wraps ErrInvalid; Parse reports as many problems
// as it can find at once, each with the file position of the offending node
// (DecodeJSON, with its field).
// The format itself is documented for users in docs/flows.md.
package flow
