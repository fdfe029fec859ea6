// Package termsafe escapes text from outside — prompts, agent output, event
// fields, worker registrations, error messages quoting input — before it
// reaches an operator's terminal, so that none of it can drive the
// terminal: no escape sequences (CSI, OSC 52 that writes the clipboard, a
// title change), no other C0 or C1 control, no carriage return or backspace
// that rewrites what is shown, no bidirectional override that reorders it,
// and no invalid UTF-8.
//
// Line is for one-line fields (newline and tab escaped too), Text and
// Writer for multi-line text (newline and tab kept). Each escaped character
// reads as its Go escape (\x1b, \r, \u009b), and an invalid byte as \xNN.
// The operator CLIs (cmd/controller, cmd/worker) use it; where a command
// keeps the bytes (output to a pipe, logs --raw) is theirs to say. It must
// not know what the text is.
package termsafe
