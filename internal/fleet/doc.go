// Package fleet is the registry of Drover's processes: each worker's
// registration (host, pool, slots, load, its runtimes' health) in the
// drover-workers bucket, read by `controller workers` and `controller
// runtime list/health`, and each controller's (role, epoch, how far it has
// folded) in drover-controllers, read by `controller controllers`; each
// renewed while its process lives and aged out when it dies.
//
// It must not know how workers claim or run attempts, nor how controllers
// elect a leader (package leadership) or fold.
package fleet
