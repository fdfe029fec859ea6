package queue

import (
	"errors"
	"fmt"
	"sync"
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
	// With NoLog a failure to start JetStream (an unusable store dir, say)
	// would be silent: Start would return without listening, and we would wait
	// out the whole timeout and report no cause. Keep the server's errors.
	errs := &errorLog{}
	ns.SetLogger(errs, false, false)
	ns.Start()
	if errs.fatal() || !ns.JetStreamEnabled() {
		shutdown(ns)
		return nil, fmt.Errorf("%w: %s", ErrNotReady, errs.last())
	}
	if !ns.ReadyForConnections(30 * time.Second) {
		shutdown(ns)
		return nil, fmt.Errorf("%w: listening on %s:%d: %s", ErrNotReady, o.Host, o.Port, errs.last())
	}
	return ns, nil
}

func shutdown(ns *server.Server) {
	ns.Shutdown()
	ns.WaitForShutdown()
}

// errorLog is the embedded server's logger: it drops everything but keeps
// the last error, to explain a failed start. Start returns right after
// logging a fatal error, so a fatal error means the server is not serving.
type errorLog struct {
	mu     sync.Mutex
	err    string
	failed bool
}

func (l *errorLog) keep(fatal bool, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.err = fmt.Sprintf(format, v...)
	l.failed = l.failed || fatal
}

func (l *errorLog) fatal() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}

func (l *errorLog) last() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == "" {
		return "no error logged"
	}
	return l.err
}

func (l *errorLog) Fatalf(format string, v ...any) { l.keep(true, format, v...) }
func (l *errorLog) Errorf(format string, v ...any) { l.keep(false, format, v...) }
func (*errorLog) Noticef(string, ...any)           {}
func (*errorLog) Warnf(string, ...any)             {}
func (*errorLog) Debugf(string, ...any)            {}
func (*errorLog) Tracef(string, ...any)            {}
