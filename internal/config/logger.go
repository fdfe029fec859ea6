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
