package natsconn

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/drover-dev/drover/internal/natstest"
)

// startConfigured starts an embedded server from a nats-server config file
// with the given body, in a fresh store dir, on port (-1: a free one).
func startConfigured(t *testing.T, body string, port int) (*server.Server, string) {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "server.conf")
	writeFile(t, conf, body)
	ns, err := StartEmbedded(EmbeddedOptions{StoreDir: t.TempDir(), Port: port, ConfigFile: conf})
	if err != nil {
		t.Fatalf("start embedded server: %v", err)
	}
	t.Cleanup(func() { stopServer(ns) })
	return ns, conf
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// dial connects with o and fails the test on error.
func dial(t *testing.T, o ClientOptions) {
	t.Helper()
	nc, err := Connect(o)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	nc.Close()
}

// refused connects with o and returns the error's text, failing the test if
// the connection succeeds or the error is not a ConnectError.
func refused(t *testing.T, o ClientOptions) (*ConnectError, string) {
	t.Helper()
	nc, err := Connect(o)
	if err == nil {
		nc.Close()
		t.Fatal("connected, want a refusal")
	}
	var ce *ConnectError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is not a ConnectError", err, err)
	}
	return ce, err.Error()
}

func TestConnectAuth(t *testing.T) {
	t.Parallel()
	seed, pub := natstest.NKeyUser(t)
	seedFile := filepath.Join(t.TempDir(), "user.nk")
	writeFile(t, seedFile, seed)
	ns, _ := startConfigured(t, `authorization {
  users = [
    {user: alice, password: "s3cret-password"}
    {nkey: `+pub+`}
  ]
}`, -1)
	url := ns.ClientURL()
	dial(t, ClientOptions{URL: url, User: "alice", Password: "s3cret-password"})
	dial(t, ClientOptions{URL: url, NKeyFile: seedFile})

	ce, msg := refused(t, ClientOptions{URL: url})
	want := "NATS at " + url + " refused the connection: authorization violation (set nats.user/nats.password, nats.token, nats.nkey_file or nats.creds_file)"
	if msg != want || !IsAuthError(ce) || ce.Unreachable || !IsConfigError(ce) {
		t.Errorf("without credentials:\n got %s\nwant %s (a refusal, not unreachable)", msg, want)
	}
	_, msg = refused(t, ClientOptions{URL: url, User: "alice", Password: "wrong-password"})
	if !strings.Contains(msg, "authorization violation (check nats.user/nats.password") || strings.Contains(msg, "wrong-password") {
		t.Errorf("wrong password: %s", msg)
	}
	_, msg = refused(t, ClientOptions{URL: url, Token: "some-token-value"})
	if !strings.Contains(msg, "check nats.token") || strings.Contains(msg, "some-token-value") {
		t.Errorf("token against a user server: %s", msg)
	}
}

func TestConnectToken(t *testing.T) {
	t.Parallel()
	ns, _ := startConfigured(t, `authorization { token: "tok-0123456789" }`, -1)
	dial(t, ClientOptions{URL: ns.ClientURL(), Token: "tok-0123456789"})
	if _, msg := refused(t, ClientOptions{URL: ns.ClientURL()}); !strings.Contains(msg, "authorization violation") {
		t.Errorf("no token: %s", msg)
	}
}

func TestConnectTLS(t *testing.T) {
	t.Parallel()
	p := natstest.NewPKI(t, t.TempDir())
	ns, _ := startConfigured(t, fmt.Sprintf(`tls {
  cert_file: %q
  key_file: %q
  ca_file: %q
  verify: true
}`, p.ServerCert, p.ServerKey, p.CA), -1)
	url := ns.ClientURL()
	if !strings.HasPrefix(url, "tls://") {
		t.Fatalf("client URL %s, want tls://", url)
	}
	full := ClientTLS{CAFile: p.CA, CertFile: p.ClientCert, KeyFile: p.ClientKey}
	dial(t, ClientOptions{URL: url, TLS: full})
	// A nats:// URL is upgraded: the server requires TLS.
	dial(t, ClientOptions{URL: strings.Replace(url, "tls://", "nats://", 1), TLS: full})

	ce, msg := refused(t, ClientOptions{URL: url, TLS: ClientTLS{CertFile: p.ClientCert, KeyFile: p.ClientKey}})
	if !ce.Config || !strings.Contains(msg, "signed by an authority this client does not trust") ||
		!strings.Contains(msg, "verified against the system's CAs; set nats.tls.ca_file") {
		t.Errorf("without the CA: %s", msg)
	}
	other := natstest.NewPKI(t, t.TempDir())
	_, msg = refused(t, ClientOptions{URL: url, TLS: ClientTLS{CAFile: other.CA, CertFile: p.ClientCert, KeyFile: p.ClientKey}})
	if !strings.Contains(msg, "verified against nats.tls.ca_file "+other.CA) {
		t.Errorf("with another CA: %s", msg)
	}
	_, msg = refused(t, ClientOptions{URL: url, TLS: ClientTLS{CAFile: p.CA}})
	if !strings.Contains(msg, "TLS") || !strings.Contains(msg, "nats.tls.cert_file") {
		t.Errorf("without a client certificate: %s", msg)
	}
}

func TestConnectTLSWantedButNotOffered(t *testing.T) {
	t.Parallel()
	p := natstest.NewPKI(t, t.TempDir())
	ns := startServer(t)
	_, msg := refused(t, ClientOptions{URL: ns.ClientURL(), TLS: ClientTLS{CAFile: p.CA}})
	if !strings.Contains(msg, "does not offer TLS") {
		t.Errorf("TLS against a plain server: %s", msg)
	}
}

func TestConnectUnreachable(t *testing.T) {
	t.Parallel()
	ns := startServer(t)
	url := ns.ClientURL()
	stopServer(ns)
	if ce, msg := refused(t, ClientOptions{URL: url, Timeout: time.Second}); ce.Config || !strings.Contains(msg, "is unreachable") || !ce.Unreachable {
		t.Errorf("stopped server: %s (Unreachable %t)", msg, ce.Unreachable)
	}
}

// TestClosedOnRefusedReconnect: a daemon's server restarts with other
// credentials; the connection is closed (not retried forever) and Closed
// says why.
func TestClosedOnRefusedReconnect(t *testing.T) {
	t.Parallel()
	ns, _ := startConfigured(t, `authorization { user: a, password: "first-password" }`, -1)
	port := serverPort(t, ns)
	closed := make(chan error, 1)
	nc, err := Connect(ClientOptions{URL: ns.ClientURL(), User: "a", Password: "first-password", Reconnect: true,
		Closed: func(err error) { closed <- err }})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	stopServer(ns)
	startConfigured(t, `authorization { user: a, password: "second-password" }`, port)
	select {
	case err := <-closed:
		if !IsAuthError(err) || !strings.Contains(err.Error(), "refused the connection: authorization violation (check nats.user/nats.password") {
			t.Errorf("Closed with %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the connection keeps retrying credentials the server refuses")
	}
	if !nc.IsClosed() {
		t.Error("connection not closed")
	}
}

func TestClientOptionsValidate(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "f")
	writeFile(t, file, "x")
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tc := range []struct {
		name string
		o    ClientOptions
		want []string // keys, in order
	}{
		{"none", ClientOptions{}, nil},
		{"user and password", ClientOptions{User: "u", Password: "p"}, nil},
		{"user and token", ClientOptions{User: "u", Password: "p", Token: "t"}, []string{"nats.token"}},
		{"nkey and creds", ClientOptions{NKeyFile: file, CredsFile: file}, []string{"nats.creds_file"}},
		{"user alone", ClientOptions{User: "u"}, []string{"nats.password"}},
		{"password alone", ClientOptions{Password: "p"}, []string{"nats.user"}},
		{"missing nkey", ClientOptions{NKeyFile: missing}, []string{"nats.nkey_file"}},
		{"missing creds", ClientOptions{CredsFile: missing}, []string{"nats.creds_file"}},
		{"missing ca", ClientOptions{TLS: ClientTLS{CAFile: missing}}, []string{"nats.tls.ca_file"}},
		{"directory", ClientOptions{TLS: ClientTLS{CAFile: t.TempDir()}}, []string{"nats.tls.ca_file"}},
		{"cert without key", ClientOptions{TLS: ClientTLS{CertFile: file}}, []string{"nats.tls.key_file"}},
		{"key without cert", ClientOptions{TLS: ClientTLS{KeyFile: file}}, []string{"nats.tls.cert_file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.URL = "nats://127.0.0.1:4222"
			err := tc.o.Validate()
			var keys []string
			if err != nil {
				for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
					var oe *OptionError
					if !errors.As(e, &oe) || !errors.Is(e, ErrClientOptions) {
						t.Fatalf("%v is not an OptionError", e)
					}
					keys = append(keys, oe.Key)
				}
			}
			if strings.Join(keys, ",") != strings.Join(tc.want, ",") {
				t.Errorf("keys %v, want %v (%v)", keys, tc.want, err)
			}
			if err != nil && (strings.Contains(err.Error(), `"p"`) || strings.Contains(err.Error(), `"t"`)) {
				t.Errorf("a secret is in %v", err)
			}
		})
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"nats://h:4222":                      "nats://h:4222",
		"nats://u:pass@h:4222":               "nats://u:xxxxx@h:4222",
		"nats://tok-123@h:4222":              "nats://REDACTED@h:4222",
		"nats://u:p1@a:1,nats://u:p2@b:2":    "nats://u:xxxxx@a:1,nats://u:xxxxx@b:2",
		"tls://127.0.0.1:4222,nats://b:4222": "tls://127.0.0.1:4222,nats://b:4222",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestServerOptions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store := filepath.Join(dir, "nats")
	conf := func(body string) string {
		p := filepath.Join(t.TempDir(), "server.conf")
		writeFile(t, p, body)
		return p
	}
	o, err := ServerOptions(EmbeddedOptions{StoreDir: store, Port: 4333, SyncAlways: true,
		ConfigFile: conf("server_name: edge\nmax_payload: 2MB\njetstream { max_file_store: 1GB }\nauthorization { token: abcdefgh }\n")})
	if err != nil {
		t.Fatal(err)
	}
	if o.ServerName != "edge" || o.MaxPayload != 2<<20 || o.JetStreamMaxStore != 1<<30 || o.Authorization != "abcdefgh" {
		t.Errorf("the file's settings: name %q payload %d store %d auth %q", o.ServerName, o.MaxPayload, o.JetStreamMaxStore, o.Authorization)
	}
	if !o.JetStream || o.StoreDir != store || o.Host != "127.0.0.1" || o.Port != 4333 || !o.SyncAlways || !o.NoSigs {
		t.Errorf("Drover's settings: %+v", o)
	}
	if o, err := ServerOptions(EmbeddedOptions{StoreDir: store}); err != nil || o.ServerName != "drover" {
		t.Errorf("without a file: %v %v", o.ServerName, err)
	}
	// Same address and store as Drover's: accepted.
	if _, err := ServerOptions(EmbeddedOptions{StoreDir: store, Port: 4333,
		ConfigFile: conf("listen: 127.0.0.1:4333\njetstream { store_dir: " + store + " }\n")}); err != nil {
		t.Errorf("matching listen and store_dir: %v", err)
	}
	for name, tc := range map[string]struct{ body, want string }{
		"listen":    {"listen: 0.0.0.0:4222\n", "Drover sets the address from nats.listen (127.0.0.1:4333)"},
		"port":      {"port: 5555\n", "remove listen, host and port"},
		"store dir": {"jetstream { store_dir: /elsewhere }\n", "remove store_dir"},
		"syntax":    {"authorization { users = [ \n", "server.conf"},
		"unknown":   {"authorisation { token: x }\n", "unknown field"},
		"variable":  {"authorization { token: $DROVER_TEST_UNSET_VARIABLE }\n", "DROVER_TEST_UNSET_VARIABLE"},
	} {
		_, err := ServerOptions(EmbeddedOptions{StoreDir: store, Port: 4333, ConfigFile: conf(tc.body)})
		if !errors.Is(err, ErrServerConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}
