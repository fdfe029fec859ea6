package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/eventlog/store"
	"github.com/drover-dev/drover/internal/queue"
)

// openProjection opens the projection in dir and checks that it is a fold
// of the EVENTS stream it will go on folding: the stream holds a message at
// the last sequence the projection applied, and the projection knows it
// (its event id was seen, or it was recorded as poison there).
//
// It is not when the stream lost what the projection had folded — a power
// loss with nats.sync_interval other than always, where JetStream's files
// and the projection's are written back in no order (docs/design.md,
// durability) — or when the data dir met another stream (NATS reset, a new
// nats.url). Folding on would skip the stream's next messages as seen, and
// keep events the log no longer has. Such a projection is moved aside,
// next to dir, and the log is folded again into an empty one.
func openProjection(ctx context.Context, dir string, js jetstream.JetStream, log *slog.Logger) (*store.Store, error) {
	s, err := store.Open(dir, store.Options{})
	if err != nil {
		return nil, err
	}
	why, err := notFoldOf(ctx, s, js)
	if err != nil || why == "" {
		if err != nil {
			err = errors.Join(err, s.Close())
			return nil, err
		}
		return s, nil
	}
	applied := s.Applied()
	if err := s.Close(); err != nil {
		return nil, err
	}
	aside := fmt.Sprintf("%s.not-of-the-log-%d", dir, time.Now().Unix())
	if err := os.Rename(dir, aside); err != nil {
		return nil, fmt.Errorf("controller: move the projection aside: %w", err)
	}
	log.Error("the projection is not a fold of the event log: folding the log again into an empty one",
		"why", why, "applied_seq", applied, "moved_to", aside)
	return store.Open(dir, store.Options{})
}

// notFoldOf says why s is not a fold of the EVENTS stream, "" when it is
// as far as its last applied message tells.
func notFoldOf(ctx context.Context, s *store.Store, js jetstream.JetStream) (string, error) {
	applied := s.Applied()
	if applied == 0 {
		return "", nil
	}
	stream, err := js.Stream(ctx, queue.EventsStream)
	if err != nil {
		return "", fmt.Errorf("controller: check the projection: %w", err)
	}
	msg, err := stream.GetMsg(ctx, applied)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return fmt.Sprintf("the log holds no message at sequence %d, the last the projection applied (the log's last is %d)",
			applied, stream.CachedInfo().State.LastSeq), nil
	case err != nil:
		return "", fmt.Errorf("controller: check the projection: %w", err)
	}
	var known bool
	ev, derr := event.Decode(msg.Data)
	s.Read(func(st *projection.State) {
		_, poison := st.Poisons[applied]
		known = poison || (derr == nil && st.Seen[ev.ID] != 0)
	})
	if !known {
		return fmt.Sprintf("the log's message at sequence %d, the last the projection applied, is not one it folded", applied), nil
	}
	return "", nil
}
