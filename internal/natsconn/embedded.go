package natsconn

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
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
	// ServerName identifies the server in JetStream. Defaults to the
	// config file's server_name, else "drover".
	ServerName string
	// ConfigFile is a nats-server configuration file, in the format
	// nats-server itself reads, for everything Drover does not set:
	// authorization, accounts, TLS, cluster, limits. Drover's settings
	// above win: JetStream is on with its store in StoreDir, the server
	// listens on Host:Port, and SyncInterval applies when set. A file that
	// sets a different listen address or store dir is refused rather than
	// silently overridden. Defaults to none.
	ConfigFile string
}

// ErrNotReady is returned when the embedded server does not come up in time.
var ErrNotReady = errors.New("natsconn: embedded nats-server not ready")

// StartEmbedded starts a nats-server with JetStream on disk and waits until
// it accepts clients. Shut it down with Shutdown and WaitForShutdown.
func StartEmbedded(o EmbeddedOptions) (*server.Server, error) {
	if o.StoreDir == "" {
		return nil, fmt.Errorf("natsconn: embedded nats-server: store dir is required")
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.Port == 0 {
		o.Port = 4222
	}
	opts, err := ServerOptions(o)
	if err != nil {
		return nil, err
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("natsconn: embedded nats-server: %w", err)
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

// ErrServerConfig is wrapped by the errors of a nats-server config file.
var ErrServerConfig = errors.New("natsconn: nats-server config file")

// ServerOptions builds the embedded server's options: the config file's, if
// any, with Drover's settings applied over them. It is what StartEmbedded
// runs, and lets configuration be checked before anything starts.
func ServerOptions(o EmbeddedOptions) (*server.Options, error) {
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.Port == 0 {
		o.Port = 4222
	}
	opts := &server.Options{}
	if o.ConfigFile != "" {
		var err error
		// The server's own parser: includes, variables, $ENV references,
		// and the checks nats-server makes at startup.
		if opts, err = server.ProcessConfigFile(o.ConfigFile); err != nil {
			return nil, fmt.Errorf("%w %s: %w", ErrServerConfig, o.ConfigFile, err)
		}
		if opts.Host != "" && opts.Host != o.Host || opts.Port != 0 && opts.Port != o.Port {
			return nil, fmt.Errorf("%w %s: listens on %s; Drover sets the address from nats.listen (%s): remove listen, host and port from the file",
				ErrServerConfig, o.ConfigFile, net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)), net.JoinHostPort(o.Host, strconv.Itoa(o.Port)))
		}
		if opts.StoreDir != "" && filepath.Clean(opts.StoreDir) != filepath.Clean(o.StoreDir) {
			return nil, fmt.Errorf("%w %s: puts JetStream in %s; Drover keeps it under its data dir (%s): remove store_dir from the file",
				ErrServerConfig, o.ConfigFile, opts.StoreDir, o.StoreDir)
		}
	}
	opts.Host, opts.Port = o.Host, o.Port
	opts.JetStream, opts.StoreDir = true, o.StoreDir
	if o.SyncInterval != 0 || o.SyncAlways {
		opts.SyncInterval, opts.SyncAlways = o.SyncInterval, o.SyncAlways
	}
	switch {
	case o.ServerName != "":
		opts.ServerName = o.ServerName
	case opts.ServerName == "":
		opts.ServerName = "drover"
	}
	// Drover owns the process: signals stop the controller, and the server's
	// own log is replaced by the error keeper below.
	opts.NoSigs, opts.NoLog = true, true
	return opts, nil
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
