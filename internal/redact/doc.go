// Package redact removes known secret values from text before it leaves a
// worker: events, output chunks, log lines (Handler) and the stored log of
// the CLI's output (Writer).
//
// It knows values, not meaning: the caller decides which environment
// variables are secret (IsSecretName is the naming rule it offers). It must
// not know where the text goes.
package redact
