// Package config loads Drover's configuration once, with one precedence:
// command-line flags over DROVER_* environment variables over the YAML
// config file over defaults. Viper lives here and nowhere else; the rest of
// Drover receives the plain, validated Config struct. It also holds the
// built-in runtimes (builtin.go; their facts are in docs/runtimes.md).
//
// It must not know NATS, streams, events or the projection: it imports only
// the shared vocabulary (drovertype), the flow format whose retry fields and
// durations the defaults reuse, and the tracing settings' struct, so that
// every package may take its settings from it.
package config
