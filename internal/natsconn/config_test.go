package natsconn_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/natsconn"
)

// natsFiles makes readable files for the file-valued keys.
func natsFiles(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{}
	for _, name := range []string{"nkey", "creds", "ca", "cert", "key"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(name), 0o600); err != nil {
			t.Fatal(err)
		}
		files[name] = p
	}
	return files
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "drover.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// load is what the daemons do: load the configuration, then check its
// nats.* settings.
func load(t *testing.T, file string) (*config.Config, error) {
	t.Helper()
	c, err := config.Load(config.LoadOptions{File: file})
	if err != nil {
		return nil, err
	}
	return c, natsconn.CheckConfig(c)
}

// TestClientFor: the configuration's credentials and TLS become the
// client's, with the role and id given.
func TestClientFor(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	f := natsFiles(t)
	t.Setenv("DROVER_NATS_USER", "from-env")
	t.Setenv("DROVER_NATS_PASSWORD", "env-password")
	t.Setenv("DROVER_NATS_TLS_CA_FILE", f["ca"])
	c, err := load(t, writeFile(t, "nats:\n  user: from-file\n  password: file-password\n"))
	if err != nil {
		t.Fatal(err)
	}
	co := natsconn.ClientFor(c, "drover-test", natsconn.RoleWorker, "w1")
	if co.User != "from-env" || co.Password != "env-password" || co.TLS.CAFile != f["ca"] || co.Role != natsconn.RoleWorker || co.ID != "w1" || co.URL == "" {
		t.Errorf("client options: %+v", co)
	}
}

// TestNATSInvalid: each bad combination is reported with its key.
func TestNATSInvalid(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	f := natsFiles(t)
	missing := filepath.Join(t.TempDir(), "missing.pem")
	listenConflict := writeFile(t, "listen: 0.0.0.0:4222\n")
	for _, tc := range []struct {
		name, file string
		env        map[string]string
		want       string
	}{
		{"user and token", "nats:\n  user: u\n  password: secret-pw\n  token: secret-tok\n", nil, "nats.token: nats.user/nats.password and nats.token are both set"},
		{"token and nkey env", "", map[string]string{"DROVER_NATS_TOKEN": "secret-tok", "DROVER_NATS_NKEY_FILE": f["nkey"]}, "nats.nkey_file: nats.token and nats.nkey_file are both set"},
		{"nkey and creds", "nats:\n  nkey_file: " + f["nkey"] + "\n  creds_file: " + f["creds"] + "\n", nil, "nats.creds_file"},
		{"user alone", "nats:\n  user: u\n", nil, "nats.password: is required with nats.user"},
		{"password alone", "nats:\n  password: secret-pw\n", nil, "nats.user: is required with nats.password"},
		{"missing nkey", "nats:\n  nkey_file: " + missing + "\n", nil, "nats.nkey_file: open " + missing + ": no such file or directory"},
		{"missing creds", "nats:\n  creds_file: " + missing + "\n", nil, "nats.creds_file: open " + missing},
		{"missing ca", "", map[string]string{"DROVER_NATS_TLS_CA_FILE": missing}, "nats.tls.ca_file: open " + missing},
		{"cert without key", "nats:\n  tls:\n    cert_file: " + f["cert"] + "\n", nil, "nats.tls.key_file"},
		{"missing server config", "nats:\n  server_config: " + missing + "\n", nil, "nats.server_config: open " + missing},
		{"server config listen", "nats:\n  server_config: " + listenConflict + "\n", nil, "nats.server_config: " + listenConflict + ": listens on 0.0.0.0:4222"},
		{"unknown tls key", "nats:\n  tls:\n    ca: x\n", nil, "ca"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, err := load(t, writeFile(t, tc.file))
			if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
			if err != nil && (strings.Contains(err.Error(), "secret-pw") || strings.Contains(err.Error(), "secret-tok")) {
				t.Errorf("a secret is in the error: %v", err)
			}
		})
	}
	// An external server has its own configuration: server_config is not
	// checked (workers may share a file naming one only the controller has).
	if _, err := load(t, writeFile(t, "nats:\n  url: nats://h:4222\n  server_config: "+missing+"\n")); err != nil {
		t.Errorf("server_config with nats.url: %v", err)
	}
}
