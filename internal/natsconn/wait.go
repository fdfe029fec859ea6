package natsconn

import (
	"context"
	"errors"
	"fmt"

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

// Denied marks err, a failed try of a start step, fatal (startup.Fatal)
// when the server has refused nc a publish for its permissions: NATS does
// not answer a request to a subject the user may not publish to, it tells
// the connection, so the request times out however long one waits. The
// error then names the subject. Any other err is returned as is.
func Denied(nc *nats.Conn, err error) error {
	if err == nil {
		return nil
	}
	if last := nc.LastError(); errors.Is(last, nats.ErrPermissionViolation) {
		return startup.Fatal(fmt.Errorf("%w: %v (this NATS user's permissions do not allow it; see docs/security.md)", err, last))
	}
	return err
}
