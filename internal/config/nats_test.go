package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
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
	conf := filepath.Join(dir, "server.conf")
	if err := os.WriteFile(conf, []byte("authorization { token: abcdefgh }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	files["server"] = conf
	return files
}

// TestNATSKeysFromFile: every authentication, TLS and server config key is
// read from the file.
func TestNATSKeysFromFile(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	f := natsFiles(t)
	c, err := Load(LoadOptions{File: writeFile(t, fmt.Sprintf(`
nats:
  user: drover
  password: file-password
  server_config: %s
  tls:
    ca_file: %s
    cert_file: %s
    key_file: %s
`, f["server"], f["ca"], f["cert"], f["key"]))})
	if err != nil {
		t.Fatal(err)
	}
	n := c.NATS
	if n.User != "drover" || n.Password.Value() != "file-password" || n.ServerConfig != f["server"] ||
		n.TLS != (NATSTLS{CAFile: f["ca"], CertFile: f["cert"], KeyFile: f["key"]}) {
		t.Errorf("nats: %+v", n)
	}
	for key, body := range map[string]string{
		"nkey_file":  "nats:\n  nkey_file: " + f["nkey"] + "\n",
		"creds_file": "nats:\n  creds_file: " + f["creds"] + "\n",
		"token":      "nats:\n  token: file-token\n",
	} {
		c, err := Load(LoadOptions{File: writeFile(t, body)})
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if c.NATS.NKeyFile+c.NATS.CredsFile+c.NATS.Token.Value() == "" {
			t.Errorf("%s not read: %+v", key, c.NATS)
		}
	}
}

// TestNATSKeysFromEnv: each key has its DROVER_NATS_* variable, and the
// environment wins over the file.
func TestNATSKeysFromEnv(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	f := natsFiles(t)
	file := writeFile(t, "nats:\n  user: from-file\n  password: file-password\n")
	t.Setenv("DROVER_NATS_USER", "from-env")
	t.Setenv("DROVER_NATS_PASSWORD", "env-password")
	t.Setenv("DROVER_NATS_TLS_CA_FILE", f["ca"])
	t.Setenv("DROVER_NATS_TLS_CERT_FILE", f["cert"])
	t.Setenv("DROVER_NATS_TLS_KEY_FILE", f["key"])
	t.Setenv("DROVER_NATS_SERVER_CONFIG", f["server"])
	c, err := Load(LoadOptions{File: file})
	if err != nil {
		t.Fatal(err)
	}
	n := c.NATS
	if n.User != "from-env" || n.Password.Value() != "env-password" || n.ServerConfig != f["server"] ||
		n.TLS != (NATSTLS{CAFile: f["ca"], CertFile: f["cert"], KeyFile: f["key"]}) {
		t.Errorf("nats: %+v", n)
	}

	t.Setenv("DROVER_NATS_USER", "")
	t.Setenv("DROVER_NATS_PASSWORD", "")
	for env, get := range map[string]func(NATS) string{
		"DROVER_NATS_TOKEN":      func(n NATS) string { return n.Token.Value() },
		"DROVER_NATS_NKEY_FILE":  func(n NATS) string { return n.NKeyFile },
		"DROVER_NATS_CREDS_FILE": func(n NATS) string { return n.CredsFile },
	} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, f["creds"])
			c, err := Load(LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if get(c.NATS) != f["creds"] {
				t.Errorf("%s not read: %+v", env, c.NATS)
			}
		})
	}
}

// TestNATSSecretsNotPrinted: however the configuration is printed, the
// password and token do not show.
func TestNATSSecretsNotPrinted(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("DROVER_NATS_USER", "drover")
	t.Setenv("DROVER_NATS_PASSWORD", "pw-0123456789")
	c, err := Load(LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.NATS.Token = "tok-0123456789" // not valid with a password, but printed alike
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "nats", c.NATS, "password", c.NATS.Password)
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "nats", c.NATS, "password", c.NATS.Password)
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	ym, err := yaml.Marshal(c.NATS)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]string{
		"%v": fmt.Sprintf("%v", c), "%+v": fmt.Sprintf("%+v", *c), "%#v": fmt.Sprintf("%#v", c.NATS),
		"%s": fmt.Sprintf("password %s", c.NATS.Password), "%q": fmt.Sprintf("%q", c.NATS.Token),
		"json": string(js), "yaml": string(ym), "slog": logged.String(),
	} {
		if strings.Contains(s, "0123456789") {
			t.Errorf("%s shows a secret: %s", name, s)
		}
		if !strings.Contains(s, "[REDACTED]") {
			t.Errorf("%s shows no [REDACTED]: %s", name, s)
		}
	}
	if c.NATS.Password.Value() != "pw-0123456789" || Secret("").String() != "" {
		t.Error("Value or an empty secret")
	}
}
