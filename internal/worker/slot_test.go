package worker

import "testing"

// An attempt that finishes gives its slot back for a finishing place; with
// every place taken it keeps the slot; at its end it gives back what it
// holds, once, however often it is told.
func TestSlotFinishing(t *testing.T) {
	w := &Worker{slots: make(chan struct{}, 1), finishing: make(chan struct{}, 1)}
	held := func(slots, finishing int) {
		t.Helper()
		if len(w.slots) != slots || len(w.finishing) != finishing {
			t.Fatalf("%d slots and %d finishing places taken, want %d and %d", len(w.slots), len(w.finishing), slots, finishing)
		}
	}
	w.slots <- struct{}{} // the claim loop takes the slot for a job
	a := w.takenSlot()
	a.finish()
	held(0, 1)
	a.finish()
	held(0, 1)

	w.slots <- struct{}{}
	b := w.takenSlot()
	b.finish() // the place is a's: b keeps its slot
	held(1, 1)

	a.release()
	held(1, 0)
	b.release()
	held(0, 0)
	b.finish()
	b.release()
	a.release()
	held(0, 0)

	var none *slot // a delivery handled outside a claim loop
	none.finish()
}
