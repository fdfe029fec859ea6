// Package fleet is the worker registry: each worker's registration (host,
// pool, slots, load, its runtimes' health) in the drover-workers bucket,
// renewed while the worker lives and aged out when it dies, and read by
// `controller workers` and `controller runtime list/health`.
//
// It must not know how workers claim or run attempts.
package fleet
