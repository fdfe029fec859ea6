package controller

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/natsconn"
	"github.com/drover-dev/drover/internal/queue"
	"github.com/drover-dev/drover/internal/startup"
)

// connectAndEnsure waits, in order, for what the controller needs of NATS
// (docs/operations.md#start-order): a connection (NATS not started yet, or
// a Service with no ready pod), JetStream answering (a cluster still
// electing its leader), then Drover's streams and buckets, which it creates
// (Ensure, tried again while JetStream cannot place them yet) and opens as
// the workers will. Only refused credentials, TLS or options that cannot
// work, permissions that deny a step, and a layout JetStream refuses for
// good return before ctx ends.
func connectAndEnsure(ctx context.Context, w *startup.Waiter, co natsconn.ClientOptions, o queue.StreamOptions) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := natsconn.ConnectWait(ctx, w, func() natsconn.ClientOptions { return co })
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err == nil {
		err = w.Wait(ctx, "JetStream", func(ctx context.Context) error {
			return natsconn.Denied(nc, queue.CheckJetStream(ctx, js))
		})
	}
	if err == nil {
		err = w.Wait(ctx, "Drover's streams and buckets", func(ctx context.Context) error {
			if err := queue.Ensure(ctx, js, o); err != nil {
				if ce := (*queue.ConfigError)(nil); errors.As(err, &ce) {
					return startup.Fatal(err)
				}
				return natsconn.Denied(nc, err)
			}
			return natsconn.Denied(nc, queue.CheckBuckets(ctx, js))
		})
	}
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("controller: %w", err)
	}
	return nc, js, nil
}
