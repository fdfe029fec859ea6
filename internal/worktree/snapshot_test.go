package worktree

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The buffered copy hashes files of every size whole: empty, smaller than
// the buffer, and spanning several reads.
func TestSnapshotHashesContent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	contents := map[string]string{
		"empty":     "",
		"small.txt": "hi\n",
		"big.bin":   strings.Repeat("0123456789abcdef", 5000) + "tail", // 80 KiB: three reads
	}
	for name, body := range contents {
		writeFile(t, filepath.Join(dir, name), body, 0o644)
	}
	writeFile(t, filepath.Join(dir, "run.sh"), "#!/bin/sh\n", 0o755)
	snap, err := takeSnapshot(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range contents {
		want := fileState{mode: modeFile, hash: sha256.Sum256([]byte(body))}
		if snap[name] != want {
			t.Errorf("%s: %x mode %o, want %x mode %o", name, snap[name].hash, snap[name].mode, want.hash, want.mode)
		}
	}
	if got := snap["run.sh"]; got.mode != modeExec || got.hash != sha256.Sum256([]byte("#!/bin/sh\n")) {
		t.Errorf("run.sh: %+v", got)
	}
}

// Hashing a small file must not allocate a read buffer each time: a
// worktree's every file is hashed twice per attempt.
func TestHashFileReusesBuffer(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f.go")
	writeFile(t, p, strings.Repeat("x", 2000), 0o644)
	if _, err := hashFile(p); err != nil { // fill the pool
		t.Fatal(err)
	}
	const n = 200
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		if _, err := hashFile(p); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	// Opening the file and the hash state take a few hundred bytes; a
	// buffer per call would be 32 KiB. (The race detector drops some pooled
	// buffers on purpose, hence the margin.)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 16<<10 {
		t.Errorf("hashFile allocates %d bytes per call, want well under 32 KiB", per)
	}
}

// BenchmarkSnapshot takes the snapshot of a worktree of 2,000 small files,
// as Prepare and Observe each do once per attempt.
func BenchmarkSnapshot(b *testing.B) {
	dir := b.TempDir()
	for i := range 2000 {
		p := filepath.Join(dir, fmt.Sprintf("p%02d", i/50), fmt.Sprintf("f%02d.go", i%50))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.Repeat("x", 1000+i%2000)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := takeSnapshot(context.Background(), dir); err != nil {
			b.Fatal(err)
		}
	}
}
