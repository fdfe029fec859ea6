package exectest

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// TestNoTextFileBusy writes and runs scripts while other goroutines fork
// without pause: with os.WriteFile this fails with "text file busy" within
// a few hundred rounds on a loaded machine.
func TestNoTextFileBusy(t *testing.T) {
	dir := t.TempDir()
	stop := make(chan struct{})
	var forks sync.WaitGroup
	for range 4 {
		forks.Add(1)
		go func() {
			defer forks.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_ = exec.Command("true").Run()
			}
		}()
	}
	defer func() { close(stop); forks.Wait() }()
	for i := range 300 {
		p := filepath.Join(dir, fmt.Sprintf("s%d", i))
		if err := WriteExecutable(p, []byte("#!/bin/sh\nexit 0\n")); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(p).CombinedOutput(); err != nil {
			t.Fatalf("round %d: %v: %s", i, err, out)
		}
	}
}
