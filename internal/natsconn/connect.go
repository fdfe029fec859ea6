package natsconn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Role is the kind of Drover process a connection belongs to. It picks the
// connection's inbox prefix, so that NATS permissions can let each role
// subscribe to its own replies only (docs/security.md).
type Role string

// The roles of docs/security.md.
const (
	RoleController Role = "controller"
	RoleWorker     Role = "worker"
	RoleOperator   Role = "operator"
)

// InboxRoot is the root of every Drover inbox. It is not the usual _INBOX,
// so that a permission another application of the account holds on _INBOX.>
// does not reach Drover's replies.
const InboxRoot = "_INBOX_drover"

// InboxPrefix is the inbox prefix of a role; id, when not empty, narrows it
// to one process (a worker's id), for a NATS user per worker.
func InboxPrefix(r Role, id string) string {
	p := InboxRoot + "." + string(r)
	if id != "" {
		p += "." + id
	}
	return p
}

// ClientOptions is how every Drover process connects to NATS: the daemons
// (controller, workers) and the operator commands alike. At most one of the
// authentication methods is set; Validate says which combination is wrong.
type ClientOptions struct {
	// URL of the server: nats://host:port, or tls://host:port to require TLS.
	URL string
	// Name is the connection's name, shown by the server's monitoring.
	Name string
	// Role and ID choose the inbox prefix (see InboxPrefix).
	Role Role
	ID   string

	// User and Password authenticate with a user and password.
	User, Password string
	// Token authenticates with a token.
	Token string
	// NKeyFile is a file holding an NKey seed (SU...).
	NKeyFile string
	// CredsFile is a JWT user credentials file (.creds).
	CredsFile string
	// TLS configures TLS; any field set turns TLS on.
	TLS ClientTLS

	// Reconnect makes the connection reconnect forever after it was lost, as
	// a daemon must; otherwise (operator commands) a lost connection stays
	// lost. Connect never retries the first connection: a refused or
	// unreachable server is reported at once (ConnectWait waits for one).
	Reconnect bool
	// Timeout bounds the first connection. Defaults to nats.go's 2s.
	Timeout time.Duration
	// Logger receives disconnections, reconnections and asynchronous errors
	// (a permission violation). Defaults to discarding.
	Logger *slog.Logger
	// Closed, when set, is called once if the connection is closed for a
	// reason other than Close: a server that keeps refusing the credentials
	// after a reconnection (see docs/security.md). Daemons stop on it.
	Closed func(error)
}

// ClientTLS is the client side of TLS.
type ClientTLS struct {
	// CAFile is a PEM bundle of the CAs that sign the server's certificate;
	// empty trusts the system's roots.
	CAFile string
	// CertFile and KeyFile are the client certificate and key, for a server
	// that verifies its clients (mutual TLS).
	CertFile, KeyFile string
}

// On reports whether any TLS setting is made.
func (t ClientTLS) On() bool { return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" }

// ErrClientOptions is wrapped by every ClientOptions validation error.
var ErrClientOptions = errors.New("natsconn: invalid NATS client options")

// OptionError is one invalid client option, named by its config key.
type OptionError struct {
	Key, Problem string
}

func (e *OptionError) Error() string {
	return ErrClientOptions.Error() + ": " + e.Key + ": " + e.Problem
}

func (e *OptionError) Unwrap() error { return ErrClientOptions }

// Validate checks the options that can be checked without a server: one
// authentication method at most, files readable, certificate and key
// together. It returns OptionErrors, joined.
func (o ClientOptions) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &OptionError{Key: key, Problem: fmt.Sprintf(format, args...)})
	}
	if o.URL == "" {
		bad("nats.url", "no server URL")
	}
	if m := o.authMethods(); len(m) > 1 {
		bad(strings.Split(m[1], "/")[0], "%s are both set: set one way to authenticate: nats.user/nats.password, nats.token, nats.nkey_file or nats.creds_file", strings.Join(m, " and "))
	}
	if o.User != "" && o.Password == "" {
		bad("nats.password", "is required with nats.user")
	}
	if o.Password != "" && o.User == "" {
		bad("nats.user", "is required with nats.password")
	}
	if (o.TLS.CertFile == "") != (o.TLS.KeyFile == "") {
		key := "nats.tls.key_file"
		if o.TLS.CertFile == "" {
			key = "nats.tls.cert_file"
		}
		bad(key, "nats.tls.cert_file and nats.tls.key_file go together (the client certificate and its key)")
	}
	for _, f := range []struct{ key, path string }{
		{"nats.nkey_file", o.NKeyFile}, {"nats.creds_file", o.CredsFile},
		{"nats.tls.ca_file", o.TLS.CAFile}, {"nats.tls.cert_file", o.TLS.CertFile}, {"nats.tls.key_file", o.TLS.KeyFile},
	} {
		if err := CheckReadable(f.path); err != nil {
			bad(f.key, "%v", err)
		}
	}
	return errors.Join(errs...)
}

// CheckReadable checks that path, if set, is a file this process can read.
func CheckReadable(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.IsDir() {
		return fmt.Errorf("%s is a directory, not a file", path)
	}
	if _, err := f.Read(make([]byte, 1)); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// authMethods names the authentication methods set.
func (o ClientOptions) authMethods() []string {
	var m []string
	if o.User != "" || o.Password != "" {
		m = append(m, "nats.user/nats.password")
	}
	if o.Token != "" {
		m = append(m, "nats.token")
	}
	if o.NKeyFile != "" {
		m = append(m, "nats.nkey_file")
	}
	if o.CredsFile != "" {
		m = append(m, "nats.creds_file")
	}
	return m
}

// natsOptions turns o into nats.go options.
func (o ClientOptions) natsOptions() ([]nats.Option, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := []nats.Option{nats.Name(o.Name)}
	if o.Role != "" {
		opts = append(opts, nats.CustomInboxPrefix(InboxPrefix(o.Role, o.ID)))
	}
	if o.Timeout > 0 {
		opts = append(opts, nats.Timeout(o.Timeout))
	}
	switch {
	case o.User != "":
		opts = append(opts, nats.UserInfo(o.User, o.Password))
	case o.Token != "":
		opts = append(opts, nats.Token(o.Token))
	case o.NKeyFile != "":
		opt, err := nats.NkeyOptionFromSeed(o.NKeyFile)
		if err != nil {
			return nil, &OptionError{Key: "nats.nkey_file", Problem: err.Error()}
		}
		opts = append(opts, opt)
	case o.CredsFile != "":
		// Read at every (re)connection, so a renewed file is picked up.
		opts = append(opts, nats.UserCredentials(o.CredsFile))
	}
	if o.TLS.On() {
		opts = append(opts, nats.Secure())
	}
	if o.TLS.CAFile != "" {
		opts = append(opts, nats.RootCAs(o.TLS.CAFile))
	}
	if o.TLS.CertFile != "" {
		opts = append(opts, nats.ClientCert(o.TLS.CertFile, o.TLS.KeyFile))
	}
	if o.Reconnect {
		// A restarted server (or a cluster failover) is a pause, not an
		// exit. A server that refuses the credentials twice in a row after a
		// reconnection closes the connection (nats.go's default, kept on
		// purpose: credentials that no longer work will not start working by
		// retrying, and the daemon exits saying so instead of spinning).
		opts = append(opts, nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond))
	} else {
		opts = append(opts, nats.NoReconnect())
	}
	opts = append(opts,
		nats.RetryOnFailedConnect(false),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { log.Info("nats reconnected", "url", c.ConnectedUrlRedacted()) }),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			attrs := []any{"err", err}
			if sub != nil {
				attrs = append(attrs, "subject", sub.Subject)
			}
			if errors.Is(err, nats.ErrPermissionViolation) {
				attrs = append(attrs, "hint", "this NATS user's permissions do not allow it; see docs/security.md")
			}
			log.Error("nats error", attrs...)
		}),
	)
	if o.Closed != nil {
		closed := o.Closed
		opts = append(opts, nats.ClosedHandler(func(c *nats.Conn) {
			// Close, called by the owner, leaves no auth error; with
			// endless reconnects, nats.go closes a connection by itself
			// only when the server keeps refusing its credentials.
			if err := c.LastError(); IsAuthError(err) {
				closed(explain(o, err))
			}
		}))
	}
	return opts, nil
}

// Connect dials NATS with o. A refused or failed connection is a
// *ConnectError that says why in words an operator can act on.
func Connect(o ClientOptions) (*nats.Conn, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	opts, err := o.natsOptions()
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(o.URL, opts...)
	if err != nil {
		return nil, explain(o, err)
	}
	return nc, nil
}

// ConnectError is a connection NATS refused or that could not be made.
type ConnectError struct {
	// URL is the server's URL without any password in it.
	URL string
	// What happened, and Hint, what to change (may be empty).
	What, Hint string
	Err        error
	// Unreachable is a server that could not be reached or did not answer
	// (nothing listens, a timeout): trying later may work, unlike a refusal.
	Unreachable bool
	// Config is true when trying again cannot help: the server refused the
	// credentials, or the TLS settings do not match the server's. A server
	// unreachable or not answering is not.
	Config bool
}

func (e *ConnectError) Error() string {
	s := "NATS at " + e.URL + " " + e.What
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}

func (e *ConnectError) Unwrap() error { return e.Err }

// IsConfigError reports whether err is a failure to connect that trying
// again cannot fix: invalid client options, credentials the server refuses,
// TLS settings that do not match the server's. A daemon exits on these and
// waits on any other (ConnectWait).
func IsConfigError(err error) bool {
	var ce *ConnectError
	return errors.Is(err, ErrClientOptions) || errors.As(err, &ce) && ce.Config
}

// IsAuthError reports whether err is the server refusing the credentials.
func IsAuthError(err error) bool {
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) ||
		errors.Is(err, nats.ErrAuthRevoked) || errors.Is(err, nats.ErrAccountAuthExpired)
}

// explain turns a nats.go connection error into a ConnectError.
func explain(o ClientOptions, err error) error {
	e := &ConnectError{URL: RedactURL(o.URL), Err: err}
	var (
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		alert     tls.AlertError
		recordErr tls.RecordHeaderError
	)
	text := strings.TrimPrefix(err.Error(), "nats: tls error: ")
	ca := "the system's CAs"
	if o.TLS.CAFile != "" {
		ca = "nats.tls.ca_file " + o.TLS.CAFile
	}
	e.Config = true // but for the last cases below
	switch {
	case IsAuthError(err):
		e.What = "refused the connection: " + authReason(err)
		if m := o.authMethods(); len(m) == 0 {
			e.Hint = "set nats.user/nats.password, nats.token, nats.nkey_file or nats.creds_file"
		} else {
			e.Hint = "check " + m[0] + ": the server does not accept it"
		}
	case errors.As(err, &unknownCA):
		e.What = "presented a TLS certificate signed by an authority this client does not trust: " + text
		e.Hint = "verified against " + ca + "; set nats.tls.ca_file to the CA that signed the server's certificate"
	case errors.As(err, &hostname):
		e.What = "presented a TLS certificate for another host: " + text
		e.Hint = "connect with a host name the certificate names, or reissue the certificate with it"
	case errors.As(err, &invalid):
		e.What = "presented an invalid TLS certificate: " + text
		e.Hint = "verified against " + ca
	case errors.Is(err, nats.ErrSecureConnWanted):
		e.What = "does not offer TLS, which this client requires"
		e.Hint = "a tls:// URL or a nats.tls.* key turns TLS on; configure TLS on the server, or drop them"
	// crypto/tls reports the server's alerts with an unexported type, as a
	// net.OpError "remote error: tls: ...": only its text tells.
	case errors.Is(err, nats.ErrTLS) || errors.As(err, &alert) || errors.As(err, &recordErr) || strings.Contains(err.Error(), "tls: "):
		e.What = "failed the TLS handshake: " + text
		switch {
		case o.TLS.CertFile == "" && strings.Contains(err.Error(), "certificate required"):
			e.Hint = "the server verifies client certificates: set nats.tls.cert_file and nats.tls.key_file"
		case o.TLS.CertFile == "" && strings.Contains(err.Error(), "closed by remote after TLS handshake"):
			// TLS 1.3: a server that refuses the missing certificate may
			// close before its alert is read.
			e.Hint = "the server may verify client certificates: set nats.tls.cert_file and nats.tls.key_file"
		case o.TLS.CertFile != "":
			e.Hint = "client certificate nats.tls.cert_file " + o.TLS.CertFile + "; server verified against " + ca
		default:
			e.Hint = "server verified against " + ca
		}
	case errors.Is(err, nats.ErrNoServers) || isDialError(err):
		e.What, e.Unreachable, e.Config = "is unreachable: "+strings.TrimPrefix(err.Error(), "nats: "), true, false
	case errors.Is(err, nats.ErrTimeout):
		e.What, e.Unreachable, e.Config = "did not answer in time", true, false
	default:
		e.What, e.Config = "failed: "+err.Error(), false
	}
	return e
}

// authReason names an auth error in nats.go's words, whatever case the
// server wrote it in.
func authReason(err error) string {
	for _, known := range []error{nats.ErrAuthorization, nats.ErrAuthExpired, nats.ErrAuthRevoked, nats.ErrAccountAuthExpired} {
		if errors.Is(err, known) {
			return strings.TrimPrefix(known.Error(), "nats: ")
		}
	}
	return err.Error()
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}

// RedactURL hides the credentials of URLs that carry them
// (nats://user:pass@host, nats://token@host; several URLs separated by
// commas), for logs and errors.
func RedactURL(u string) string {
	urls := strings.Split(u, ",")
	for i, s := range urls {
		p, err := url.Parse(strings.TrimSpace(s))
		switch {
		case err != nil:
			if strings.Contains(s, "@") {
				urls[i] = "[unparsable URL with credentials]"
			}
		case p.User == nil:
		case func() bool { _, ok := p.User.Password(); return ok }():
			urls[i] = p.Redacted()
		default: // a lone user name in a NATS URL is a token
			p.User = url.User("REDACTED")
			urls[i] = p.String()
		}
	}
	return strings.Join(urls, ",")
}
