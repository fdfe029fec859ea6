package natsconn

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/drover-dev/drover/internal/config"
)

// checkNATS checks the authentication, TLS and server config settings.
// dataDir locates the embedded server's store, which the server config must
// leave alone.
func checkNATS(n config.NATS, dataDir string, bad func(key, format string, args ...any)) {
	err := withAuth(n, ClientOptions{URL: "nats://localhost"}).Validate()
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if oe := (*OptionError)(nil); errors.As(e, &oe) {
				bad(oe.Key, "%s", oe.Problem)
			}
		}
	}
	if n.ServerConfig == "" || n.URL != "" {
		return // no embedded server, or one without a file
	}
	if err := CheckReadable(n.ServerConfig); err != nil {
		bad("nats.server_config", "%v", err)
		return
	}
	host, portStr, err := net.SplitHostPort(n.Listen)
	port, perr := strconv.Atoi(portStr)
	if err != nil || perr != nil {
		return // nats.listen reports it
	}
	if _, err := ServerOptions(EmbeddedOptions{
		StoreDir: filepath.Join(dataDir, "nats"), Host: host, Port: port, ConfigFile: n.ServerConfig,
	}); err != nil {
		bad("nats.server_config", "%s", strings.TrimPrefix(err.Error(), ErrServerConfig.Error()+" "))
	}
}

// withAuth fills o's authentication and TLS from the configuration.
func withAuth(n config.NATS, o ClientOptions) ClientOptions {
	o.User, o.Password, o.Token = n.User, n.Password.Value(), n.Token.Value()
	o.NKeyFile, o.CredsFile = n.NKeyFile, n.CredsFile
	o.TLS = ClientTLS{CAFile: n.TLS.CAFile, CertFile: n.TLS.CertFile, KeyFile: n.TLS.KeyFile}
	return o
}

// ClientFor is how a process of the given role connects: the URL clients
// use (Config.ClientURL), the configured credentials and TLS. Daemons set
// Reconnect, Logger and Closed on the result; id narrows the inbox prefix
// (a worker's id). The one place nats.* keys become connection options.
func ClientFor(c *config.Config, name string, role Role, id string) ClientOptions {
	return withAuth(c.NATS, ClientOptions{URL: c.ClientURL(), Name: name, Role: role, ID: id})
}

// CheckConfig checks the nats.* settings as this package will use them:
// the authentication and TLS a client would connect with, their files
// readable, and the embedded server's config file. Each problem is a
// config.ErrInvalid error naming its key, as config.Validate's are; the
// daemons and the CLI check both after loading the configuration.
func CheckConfig(c *config.Config) error {
	var errs []error
	checkNATS(c.NATS, c.DataDir, func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", config.ErrInvalid, key, fmt.Sprintf(format, args...)))
	})
	return errors.Join(errs...)
}
