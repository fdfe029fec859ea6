package config

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/drover-dev/drover/internal/queue"
)

// NATSTLS is the client side of TLS to NATS; any field set turns TLS on, as
// does a tls:// URL.
type NATSTLS struct {
	// CAFile is a PEM bundle of the CAs that sign the server's certificate.
	// Defaults to empty: the system's roots.
	CAFile string `mapstructure:"ca_file"`
	// CertFile and KeyFile are the client certificate and its key, for a
	// server that verifies clients. Default to empty.
	CertFile string `mapstructure:"cert_file"`
	KeyFile  string `mapstructure:"key_file"`
}

// Secret is a configuration value that must not be printed, such as a
// password: it formats as [REDACTED] with fmt, slog, JSON and YAML. Value
// returns what it holds.
type Secret string

const redacted = "[REDACTED]"

// Value is the secret itself.
func (s Secret) Value() string { return string(s) }

// String implements fmt.Stringer.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString implements fmt.GoStringer (%#v).
func (s Secret) GoString() string { return strconv.Quote(s.String()) }

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON implements json.Marshaler.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// MarshalYAML implements yaml.Marshaler.
func (s Secret) MarshalYAML() (any, error) { return s.String(), nil }

// natsDefaults are the keys of the NATS authentication and TLS settings, so
// that a DROVER_NATS_* variable is recognised for each of them.
func natsDefaults() map[string]any {
	return map[string]any{
		"nats.server_config": "",
		"nats.user":          "",
		"nats.password":      "",
		"nats.token":         "",
		"nats.nkey_file":     "",
		"nats.creds_file":    "",
		"nats.tls.ca_file":   "",
		"nats.tls.cert_file": "",
		"nats.tls.key_file":  "",
	}
}

// validate checks the authentication, TLS and server config settings.
// dataDir locates the embedded server's store, which the server config must
// leave alone.
func (n NATS) validate(dataDir string, bad func(key, format string, args ...any)) {
	err := n.client(queue.ClientOptions{URL: "nats://localhost"}).Validate()
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if oe := (*queue.OptionError)(nil); errors.As(e, &oe) {
				bad(oe.Key, "%s", oe.Problem)
			}
		}
	}
	if n.ServerConfig == "" || n.URL != "" {
		return // no embedded server, or one without a file
	}
	if err := queue.CheckReadable(n.ServerConfig); err != nil {
		bad("nats.server_config", "%v", err)
		return
	}
	host, portStr, err := net.SplitHostPort(n.Listen)
	port, perr := strconv.Atoi(portStr)
	if err != nil || perr != nil {
		return // nats.listen reports it
	}
	if _, err := queue.ServerOptions(queue.EmbeddedOptions{
		StoreDir: filepath.Join(dataDir, "nats"), Host: host, Port: port, ConfigFile: n.ServerConfig,
	}); err != nil {
		bad("nats.server_config", "%s", strings.TrimPrefix(err.Error(), queue.ErrServerConfig.Error()+" "))
	}
}

// client fills o's authentication and TLS from the configuration.
func (n NATS) client(o queue.ClientOptions) queue.ClientOptions {
	o.User, o.Password, o.Token = n.User, n.Password.Value(), n.Token.Value()
	o.NKeyFile, o.CredsFile = n.NKeyFile, n.CredsFile
	o.TLS = queue.ClientTLS{CAFile: n.TLS.CAFile, CertFile: n.TLS.CertFile, KeyFile: n.TLS.KeyFile}
	return o
}

// NATSClient is how a process of the given role connects: the URL clients
// use (ClientURL), the configured credentials and TLS. Daemons set
// Reconnect, Logger and Closed on the result; id narrows the inbox prefix
// (a worker's id). The one place nats.* keys become connection options.
func (c *Config) NATSClient(name string, role queue.Role, id string) queue.ClientOptions {
	return c.NATS.client(queue.ClientOptions{URL: c.ClientURL(), Name: name, Role: role, ID: id})
}
