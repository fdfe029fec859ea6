package checkout

import (
	"context"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// An agent may nest directories deeper than any path can name; the walk,
// holding a descriptor per level on its way down, refuses past
// maxWalkDepth instead of running the worker out of descriptors.
func TestSnapshotRefusesATooDeepTree(t *testing.T) {
	t.Parallel()
	nest := func(levels int) string {
		root := t.TempDir()
		fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		for range levels {
			if err := unix.Mkdirat(fd, "d", 0o755); err != nil {
				t.Fatal(err)
			}
			sub, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			unix.Close(fd)
			if err != nil {
				t.Fatal(err)
			}
			fd = sub
		}
		defer unix.Close(fd)
		f, err := unix.Openat(fd, "leaf.txt", unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(f)
		return root
	}
	snap, err := takeSnapshot(context.Background(), nest(maxWalkDepth), "", nil)
	if err != nil || len(snap.files) != 1 {
		t.Fatalf("a tree %d deep: %v, %d files", maxWalkDepth, err, len(snap.files))
	}
	if _, err := takeSnapshot(context.Background(), nest(maxWalkDepth+1), "", nil); !errors.Is(err, errTooDeep) {
		t.Fatalf("a tree %d deep: %v, want errTooDeep", maxWalkDepth+1, err)
	}
}
