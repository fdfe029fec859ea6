package controller

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/console"
	"github.com/drover-dev/drover/internal/eventlog/store"
)

// newConsole builds the web console over this controller: its projection
// and fold notices, JetStream for artifacts, output, the fleet and dead
// letters, and the operator API for actions.
func newConsole(cfg *config.Config, c *Controller, nc *nats.Conn, js jetstream.JetStream, st *store.Store, log *slog.Logger) (*console.Console, error) {
	auth := console.Auth{Token: cfg.Console.Token.Value(), SessionTTL: cfg.Console.SessionTTL, SecureCookie: cfg.Console.SecureCookie}
	for _, u := range cfg.Console.Users {
		auth.Users = append(auth.Users, console.User{Name: u.Name, PasswordHash: u.PasswordHash.Value()})
	}
	src := console.NewNATS(js)
	return console.New(console.Options{
		Projection: st, Folds: c, Operator: consoleOperator{&Client{NC: nc}},
		Artifacts: src, Fleet: src, DeadLetters: src,
		Auth: auth, Listen: cfg.HTTP.Listen, Log: log.With("component", "console"),
	})
}

// consoleOperator takes the console's actions through the operator API,
// as the CLI does: one path, one validation.
type consoleOperator struct{ cl *Client }

func (o consoleOperator) Act(ctx context.Context, a console.Action, target, reason string) (string, error) {
	var call func(context.Context, string, string) (*OperatorResponse, error)
	switch a {
	case console.ActCancel:
		call = o.cl.Cancel
	case console.ActRetry:
		call = o.cl.Retry
	case console.ActPause:
		call = o.cl.Pause
	case console.ActResume:
		call = o.cl.Resume
	default:
		return "", fmt.Errorf("controller: no action %q", a)
	}
	resp, err := call(ctx, target, reason)
	if err != nil {
		return "", err
	}
	return resp.Message, nil
}
