package worker

import (
	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/native"
)

// NewAdapter builds the adapter a runtime's configuration names: a CLI
// run as a command (package adapter), or the native runtime, which runs in
// this process (package native; package adapter cannot build it, since
// native imports adapter for its contract).
func NewAdapter(name string, rt config.Runtime) (adapter.Adapter, error) {
	if rt.Adapter == "native" {
		return native.NewAdapter(name, rt)
	}
	return adapter.New(name, rt)
}
