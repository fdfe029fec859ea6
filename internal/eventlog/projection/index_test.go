package projection_test

import (
	"testing"

	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/eventlog/projection/foldtest"
)

// TestTaskIndexUnread: the index is right whether it is read after every
// event (the leader's decisions) or only after more changes than it keeps
// (a standby's fold, read when it takes over), and across both.
func TestTaskIndexUnread(t *testing.T) {
	sc := foldtest.StandardScenario(t, false)
	sc.AddPolicyFlows(t, "")
	for _, every := range []int{1, 7, 0} {
		projection.SetMaxUnread(t, 5)
		st := projection.NewState()
		for i, n := range sc.Nodes {
			if n.Ev == nil {
				continue
			}
			if err := st.Apply(uint64(i+1), n.Ev); err != nil {
				t.Fatal(err)
			}
			if every > 0 && i%every == 0 {
				foldtest.CheckIndex(t, st)
			}
		}
		foldtest.CheckIndex(t, st)
	}
}
