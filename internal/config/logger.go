package config

import (
	"io"
	"log/slog"
)

// Logger builds the process logger from the log settings.
func (l Log) Logger(w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(l.Level)) // validated by Validate
	opts := &slog.HandlerOptions{Level: level}
	if l.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// FlagBindings maps config keys to the flag names every Drover command uses
// for them, so that one spelling holds everywhere.
var FlagBindings = map[string]string{
	"data_dir":             "data-dir",
	"nats.url":             "nats-url",
	"nats.listen":          "nats-listen",
	"log.level":            "log-level",
	"log.format":           "log-format",
	"worker.id":            "id",
	"worker.pool":          "pool",
	"worker.slots":         "slots",
	"worker.work_dir":      "work-dir",
	"worker.runtimes":      "runtimes",
	"worker.drain_timeout": "drain-timeout",
}
