// Package dirlock makes one process the owner of a directory: an exclusive
// flock on a file in it, held for the life of the process, with the
// holder's pid, command and start time written inside so that a refused
// process can say who owns the directory.
//
// The controller takes it on its data dir before anything else starts
// (internal/controller/serve.go), so that a second controller never starts
// a nats-server on the live JetStream store nor removes the running one's
// nats.url. It must not know what the directory holds.
package dirlock
