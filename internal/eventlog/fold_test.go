package eventlog

import (
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestFold runs the datadriven fold tests in testdata/fold. Each file is one
// stream folded into a Store on an in-memory filesystem.
//
// Commands:
//
//	submit flow=ID [id=] [seq=] [time=] [nocommit]
//	  <flow spec as YAML or JSON>
//	event type=T flow=ID [task=] [attempt=] [epoch=] [key=] [id=] [v=] [seq=] [time=] [nocommit]
//	  <JSON payload; empty for none>
//	raw [seq=] [quoted | size=N] [nocommit]
//	  <the message bytes; with quoted, a Go string literal>
//	redeliver seq=N     deliver the message at N again
//	commit              commit what nocommit staged
//	reopen              close and reopen the store (a restart)
//	state               the projection, for people
//	dump [prefix=P]     the store's records
//
// A message gets the sequence after the highest one delivered unless seq=
// says otherwise, and happens at 2025-01-01T00:00:00Z plus that many seconds
// unless time= says otherwise. Event ids default to the ones the controller
// and workers write (see defaultID). A delivered message prints the records
// its commit added (+), changed (~) or removed (-), and its poison if any.
//
// After every commit the store must hold exactly what the in-memory state
// encodes to; at the end of each file the store must equal a one-batch
// rebuild of its stream and survive a reopen unchanged.
func TestFold(t *testing.T) {
	datadriven.Walk(t, "testdata/fold", func(t *testing.T, path string) {
		h := newFoldHarness(t)
		datadriven.RunTest(t, path, h.run)
		h.finish(t)
	})
}
