// Package foldtest is test support for the projection and its store: test
// streams built from datadriven directives, scenarios of flows whose events
// may arrive in any order the controller and workers could produce, stores
// on an in-memory filesystem, and a rendering of the state for people.
//
// Only tests import it: it imports testing.
package foldtest
