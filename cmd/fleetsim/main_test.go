package main

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/exitcode"
)

// TestUsage: sizes and a pace that cannot be are usage errors, said before
// anything starts.
func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--workers", "0"},
		{"--flows", "-1"},
		{"--submit-every", "-1s"},
		{"--standbys", "-1"},
		{"--standbys", "1000"},
		{"--standbys", "1", "--nats-url", "nats://127.0.0.1:4222"},
		{"--standbys", "1", "--embedded"},
	} {
		root := newRoot()
		root.SetArgs(args)
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := root.ExecuteContext(ctx)
		cancel()
		if code, ok := exitcode.Of(err); !ok || code != exitcode.Usage {
			t.Errorf("%v: %v (code %d), want a usage error", args, err, code)
		}
	}
}
