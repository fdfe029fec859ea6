package projection_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves goroutines behind: every Store
// (and its Pebble background work) must be closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
