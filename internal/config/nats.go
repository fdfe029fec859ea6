package config

import (
	"encoding/json"
	"log/slog"
	"strconv"
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
