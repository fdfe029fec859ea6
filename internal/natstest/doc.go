// Package natstest is what tests of code that talks to NATS share: a real
// nats-server with JetStream on disk (RunServer), and the credentials tests
// of a secured NATS need (an ad-hoc certificate authority with server and
// client certificates, and NKey users).
//
// It is for tests only (it imports testing) and must not know anything of
// Drover: no stream, subject or role of Drover's belongs here.
package natstest
