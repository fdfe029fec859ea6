// Package feedback tells the next attempt of a task what went wrong with the
// one before: FeedbackFrom gathers a failed attempt's error, verification,
// review, scope violations and stderr, and ComposePrompt appends them to the
// task's prompt. ComposeRound writes the same kind of section for a review
// round of a published flow: the reviews that requested changes with their
// file and line comments, the checks that failed with their logs.
//
// It is a sub-package of policy because it reads reports (package event),
// which policy itself does not need to know. Like policy it is pure and
// must not know the projection, NATS or how the prompt reaches the CLI.
//
// Everything the failed attempt produced is untrusted text. ComposePrompt
// quotes every line of it with "> ", so no line of quoted material can start
// with '@' (which the demo agent executes as a directive) or look like a
// heading; it strips '\r' and NUL bytes, replaces invalid UTF-8, bounds the
// section to MaxSection bytes, and uses no clock, so the same failure
// always composes the same prompt.
package feedback
