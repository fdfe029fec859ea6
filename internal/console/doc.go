// Package console is Drover's web console: the pages the controller serves
// under /ui/ on its HTTP listener (flows, a flow's task graph, tasks,
// attempts with their live output, workers, dead letters), their live
// updates as server-sent events, and the operator's actions behind a
// login. Its templates, script and styles are embedded.
//
// It owns what a browser sees and may do: rendering, escaping untrusted
// text (prompts, agent output, file names, event fields), laying out a
// task graph (layout.go), showing the fleet's limits (limits.go:
// cooldowns, budgets and spend, why a task waits, each worker's sandbox),
// sessions, CSRF and login throttling. It reads
// the controller through the small interfaces of sources.go (the
// projection, fold notices, artifacts and streams, the fleet, dead
// letters, the operator API), so that its tests run on fakes; nats.go
// implements the stream-backed ones over JetStream.
//
// It must not know how the fold or the decisions work, nor decide
// anything: an action goes through the same operator API as the CLI, with
// its validation.
package console
