// Package drovertype holds the words every part of Drover shares, as
// types: error classes and their categories, recovery strategies, CLI
// output formats, job kinds, and the ids of flows, tasks, attempts,
// branches and events, each with its one formatter and one parser.
//
// It is a leaf: it imports nothing of Drover's, so that every package can
// use it — the flow parser, the policy, the event schema, the worker and the
// controller — and none needs to mirror a list of another's.
package drovertype
