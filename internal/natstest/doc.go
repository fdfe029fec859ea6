// Package natstest makes the credentials tests of a secured NATS need: an
// ad-hoc certificate authority with server and client certificates, and NKey
// users.
//
// It is for tests only (it imports testing) and must not know anything of
// Drover.
package natstest
