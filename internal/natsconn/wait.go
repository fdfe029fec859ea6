package natsconn

import (
	"context"

	"github.com/nats-io/nats.go"

	"github.com/drover-dev/drover/internal/startup"
)

// ConnectWait connects like Connect, waiting with w while the server is
// unreachable or does not answer (it has not started yet, or a Service has
// no ready pod): a daemon started before NATS waits for it instead of
// exiting. What trying again cannot fix (IsConfigError) is returned at once.
//
// options is called before each try, so that a URL found in a file (a local
// controller's DATA_DIR/nats.url, written once its server is up) is read
// again.
func ConnectWait(ctx context.Context, w *startup.Waiter, options func() ClientOptions) (*nats.Conn, error) {
	var nc *nats.Conn
	err := w.Wait(ctx, "NATS", func(context.Context) error {
		c, err := Connect(options())
		if IsConfigError(err) {
			return startup.Fatal(err)
		}
		nc = c
		return err
	})
	if err != nil {
		return nil, err
	}
	return nc, nil
}
