// Package fleet is the worker registry: each worker's registration (host,
// pool, slots, load, its runtimes' health) in the drover-workers bucket,
// renewed while the worker lives and aged out when it dies, and read by
// `controller workers` and `controller runtime list/health`. A View follows
// the bucket and says, for a pool and a runtime, how many live workers
// serve it and why the others that list it do not (Place): the
// controller's placement decisions and `submit`'s warnings read it.
//
// It must not know how workers claim or run attempts, nor what is queued.
package fleet
