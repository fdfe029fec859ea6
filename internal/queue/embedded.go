package queue

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedOptions configures the nats-server the controller runs in-process
// when no external URL is configured.
type EmbeddedOptions struct {
	// StoreDir is where JetStream keeps its files. Required.
	StoreDir string
	// Host to listen on. Defaults to 127.0.0.1: an embedded server is for one
	// host unless the operator opens it on purpose.
	Host string
	// Port to listen on; -1 picks a free port. Defaults to 4222.
	Port int
	// SyncInterval is how often JetStream fsyncs; 0 keeps the server's
	// default, and SyncAlways fsyncs every write.
	SyncInterval time.Duration
	SyncAlways   bool
	// ServerName identifies the server in JetStream. Defaults to "drover".
	ServerName string
}

// ErrNotReady is returned when the embedded server does not come up in time.
var ErrNotReady = errors.New("queue: embedded nats-server not ready")

// StartEmbedded starts a nats-server with JetStream on disk and waits until
// it accepts clients. Shut it down with Shutdown and WaitForShutdown.
func StartEmbedded(o EmbeddedOptions) (*server.Server, error) {
	if o.StoreDir == "" {
		return nil, fmt.Errorf("queue: embedded nats-server: store dir is required")
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.Port == 0 {
		o.Port = 4222
	}
	if o.ServerName == "" {
		o.ServerName = "drover"
	}
	ns, err := server.NewServer(&server.Options{
		ServerName:   o.ServerName,
		Host:         o.Host,
		Port:         o.Port,
		JetStream:    true,
		StoreDir:     o.StoreDir,
		SyncInterval: o.SyncInterval,
		SyncAlways:   o.SyncAlways,
		NoSigs:       true,
		NoLog:        true,
	})
	if err != nil {
		return nil, fmt.Errorf("queue: embedded nats-server: %w", err)
	}
	ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("%w: listening on %s:%d", ErrNotReady, o.Host, o.Port)
	}
	return ns, nil
}
