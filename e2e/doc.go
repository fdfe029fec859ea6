// Package e2e holds tests that start real processes: the controller with its
// embedded nats-server, worker processes with separate work dirs (as if on
// separate hosts), the demo agent as the CLI, and real git repositories.
package e2e
