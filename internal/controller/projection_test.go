package controller

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/store"
	"github.com/drover-dev/drover/internal/natsconn"
	"github.com/drover-dev/drover/internal/queue"
)

// TestOpenProjectionChecksItAgainstTheLog: a projection that has folded
// what the EVENTS stream no longer holds (a tail lost, or another stream
// altogether) is moved aside and the log folded again from nothing; one
// that is the fold of the stream is kept.
func TestOpenProjectionChecksItAgainstTheLog(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		stream   []string // the flows' submissions the stream holds when the controller starts
		kept     bool
		says     string
		poisoned bool
	}{
		{name: "the fold of the log", stream: []string{"a", "b", "c"}, kept: true},
		{name: "the log grew meanwhile", stream: []string{"a", "b", "c", "d"}, kept: true},
		{name: "its tail lost", stream: []string{"a", "b"}, says: "no message at sequence 3"},
		{name: "another log as long", stream: []string{"x", "y", "z"}, says: "not one it folded"},
		{name: "another log, longer", stream: []string{"x", "y", "z", "w"}, says: "not one it folded"},
		{name: "its last message poison", stream: []string{"a", "b", "junk"}, kept: true, poisoned: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns, err := natsconn.StartEmbedded(natsconn.EmbeddedOptions{StoreDir: t.TempDir(), Port: -1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
			nc, err := nats.Connect(ns.ClientURL())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := queue.Ensure(ctx, js, queue.StreamOptions{}); err != nil {
				t.Fatal(err)
			}
			// The projection folded a, b and c (or a, b and junk).
			folded := []string{"a", "b", "c"}
			if tc.poisoned {
				folded = []string{"a", "b", "junk"}
			}
			dir := filepath.Join(t.TempDir(), "state")
			s, err := store.Open(dir, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for i, f := range folded {
				subject, raw := submission(t, f)
				s.Stage(uint64(i+1), subject, raw)
			}
			if err := s.Commit(); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			for _, f := range tc.stream {
				subject, raw := submission(t, f)
				if _, err := js.Publish(ctx, subject, raw); err != nil {
					t.Fatal(err)
				}
			}

			var logged strings.Builder
			log := slog.New(slog.NewTextHandler(&logged, nil))
			s, err = openProjection(ctx, dir, js, log)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			aside, _ := filepath.Glob(dir + ".not-of-the-log-*")
			if tc.kept {
				if s.Applied() != 3 || len(aside) != 0 || logged.Len() > 0 {
					t.Errorf("kept? applied %d, moved aside %v, logged %s", s.Applied(), aside, logged.String())
				}
				return
			}
			if s.Applied() != 0 || len(aside) != 1 || !strings.Contains(logged.String(), tc.says) {
				t.Fatalf("refolded? applied %d, moved aside %v, logged %s", s.Applied(), aside, logged.String())
			}
			old, err := store.Open(aside[0], store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer old.Close()
			if old.Applied() != 3 {
				t.Errorf("the projection moved aside applied %d, want 3", old.Applied())
			}
		})
	}
}

// submission is the message of a one-task flow f's submission, or a
// message that is no event at all for "junk".
func submission(t *testing.T, f string) (string, []byte) {
	t.Helper()
	if f == "junk" {
		return queue.EventSubject("junk", string(event.FlowSubmitted)), []byte("not an event")
	}
	ev, err := event.New("flow_submitted:"+f, event.FlowSubmitted, time.Unix(1, 0), f, "", "", 0, map[string]any{
		"spec": map[string]any{"name": f, "repo": "/r", "base": "main", "runtime": "demo",
			"tasks": []map[string]string{{"id": "t", "prompt": "p"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := ev.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return queue.EventSubject(f, string(event.FlowSubmitted)), raw
}
