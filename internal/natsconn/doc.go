// Package natsconn connects Drover's processes to NATS: client options from
// the configuration (authentication, TLS, the inbox prefix of each role),
// connection errors explained for people and told apart (a configuration
// error exits, a server not up yet is waited for: ConnectWait), and the
// nats-server the controller embeds when no external one is configured.
//
// It must not know Drover's streams or messages (package queue).
package natsconn
