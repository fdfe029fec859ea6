// Package leadertest is what the end-to-end tests and the benchmarks share
// to watch controllers hand over the leadership, from the log: the last
// election, and the time from a leader's end to its successor's election
// and first decision. It is test support: no production code imports it.
//
// It must not start or stop processes; its callers do.
package leadertest
