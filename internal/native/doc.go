// Package native is Drover's own agent loop: a runtime that needs no CLI
// because it talks to a model API itself (docs/runtimes.md#the-native-runtime). The model decides
// what to do; the loop decides what happens — every tool call goes through
// package tools, confined to the attempt's worktree and the task's scope,
// so a change outside the scope is prevented rather than found afterwards.
//
// The loop is an explicit finite-state machine, init → think → act → done:
// think sends the conversation to the model (package model's Client; the
// providers live in native/anthropic and native/openai), act runs the tool
// calls it answered with, and done reports. Budgets — turns, tokens in and
// out, wall time — are checked at every transition and end the attempt
// with their own error classes. Every turn is a JSON line on the attempt's
// output (events.go), which `controller logs` shows and ReadLog turns back
// into a Recording that replays the attempt through a mock model
// (native/nativetest).
//
// It owns the native runtime's configuration, its health check and its
// capabilities, and Runtime.Run: one attempt with an Input (worktree,
// scope, prompt, environment) and an output writer, returning a Result.
// Adapter puts it behind the runtime contract every runtime implements
// (package adapter): Start runs Run on a goroutine its handle owns, Stop
// cancels it with its cause, and the Result becomes the task's Exit, its
// own verdict included (adapter.Defaults). It must not know about NATS,
// git, the event log or the worker: package attempt drives the lifecycle
// around it, as it does a CLI's.
package native
