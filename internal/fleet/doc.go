// Package fleet is the registry of Drover's processes: each worker's
// registration (host, pool, slots, load, its runtimes' health) in the
// drover-workers bucket, read by `controller workers` and `controller
// runtime list/health`, and each controller's (role, epoch, how far it has
// folded) in drover-controllers, read by `controller controllers`; each
// renewed while its process lives and aged out when it dies. A View follows
// the workers' bucket and says, for a pool and a runtime, how many live
// workers serve it and why the others that list it do not (Place): the
// controller's placement decisions and `submit`'s warnings read it.
//
// It must not know how workers claim or run attempts, nor what is queued,
// nor how controllers elect a leader (package leadership) or fold.
package fleet
