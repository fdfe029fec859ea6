package checkout

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
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
	snap, err := takeSnapshot(context.Background(), dir, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range contents {
		got, want := snap.files[name], sha256.Sum256([]byte(body))
		if got.mode != modeFile || got.hash != want {
			t.Errorf("%s: %x mode %o, want %x mode %o", name, got.hash, got.mode, want, modeFile)
		}
	}
	if got := snap.files["run.sh"]; got.mode != modeExec || got.hash != sha256.Sum256([]byte("#!/bin/sh\n")) {
		t.Errorf("run.sh: %+v", got)
	}
}

// Hashing a small file must not allocate a read buffer each time: a fresh
// checkout's every file is hashed.
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

// A snapshot takes a file's hash from the previous one when lstat says the
// same and the file is older than the previous one's stamp; it reads the
// file again when either is not so, whatever the file's mtime and size say.
func TestSnapshotTrustsOnlyUnchangedOldFiles(t *testing.T) {
	if !statKey.known(statOf(mustStat(t, t.TempDir()))) {
		t.Skip("stat is not read on " + runtime.GOOS)
	}
	t.Parallel()
	ctx := context.Background()
	dir, stamps := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(dir, "old.txt"), "old\n", 0o644)
	writeFile(t, filepath.Join(dir, "same-size.txt"), "aaaa\n", 0o644)
	time.Sleep(20 * time.Millisecond) // past the file system clock's tick
	writeFile(t, filepath.Join(dir, "racy.txt"), "racy\n", 0o644)
	time.Sleep(20 * time.Millisecond)
	first, err := takeSnapshot(ctx, dir, stamps, nil)
	if err != nil {
		t.Fatal(err)
	}
	if first.stamp == 0 {
		t.Fatal("no stamp")
	}
	// Hashes the next snapshot must not read again are marked; it can only
	// have them from here.
	var marked [sha256.Size]byte
	marked[0] = 0xAA
	for _, name := range []string{"old.txt", "same-size.txt", "racy.txt"} {
		st := first.files[name]
		st.hash = marked
		first.files[name] = st
	}
	// As if the stamp had been written in racy.txt's tick.
	first.stamp = first.files["racy.txt"].stat.ctime
	// same-size.txt rewritten with its mtime and size put back: only its
	// ctime tells.
	p := filepath.Join(dir, "same-size.txt")
	info := mustStat(t, p)
	writeFile(t, p, "bbbb\n", 0o644)
	if err := os.Chtimes(p, info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}

	second, err := takeSnapshot(ctx, dir, stamps, first)
	if err != nil {
		t.Fatal(err)
	}
	if second.files["old.txt"].hash != marked {
		t.Error("an unchanged old file was read again")
	}
	if got := second.files["same-size.txt"].hash; got != sha256.Sum256([]byte("bbbb\n")) {
		t.Errorf("a rewritten file with its mtime and size restored kept hash %x", got)
	}
	if got := second.files["racy.txt"].hash; got != sha256.Sum256([]byte("racy\n")) {
		t.Errorf("a file as new as the stamp kept hash %x", got)
	}
	// Without a stamp nothing is trusted.
	second.stamp = 0
	third, err := takeSnapshot(ctx, dir, "", second)
	if err != nil {
		t.Fatal(err)
	}
	if third.files["old.txt"].hash != sha256.Sum256([]byte("old\n")) {
		t.Error("a snapshot without a stamp was trusted")
	}
}

func mustStat(t *testing.T, p string) os.FileInfo {
	t.Helper()
	info, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// BenchmarkSnapshot takes the snapshot of a worktree of 2,000 small files
// as a fresh checkout's Prepare does, hashing every file; /unchanged is the
// snapshot of the same files again, as Observe takes it after an agent
// that changed few files, and Prepare on a reused checkout.
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
	stamps := b.TempDir()
	time.Sleep(20 * time.Millisecond)
	b.Run("fresh", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := takeSnapshot(context.Background(), dir, stamps, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	prev, err := takeSnapshot(context.Background(), dir, stamps, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("unchanged", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := takeSnapshot(context.Background(), dir, stamps, prev); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The walk records a symlink as a link, a directory's included, and goes
// nowhere through it; every .git is skipped, a nested repository's too; a
// link target longer than the first read buffer is read whole.
func TestSnapshotWalksOnlyTheTree(t *testing.T) {
	t.Parallel()
	root, outside := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(outside, "secret.txt"), "s\n", 0o644)
	writeFile(t, filepath.Join(root, "a", "x.txt"), "x\n", 0o644)
	writeFile(t, filepath.Join(root, "nested", ".git", "config"), "[core]\n", 0o644)
	writeFile(t, filepath.Join(root, "nested", "y.txt"), "y\n", 0o644)
	writeFile(t, filepath.Join(root, ".git"), "gitdir: elsewhere\n", 0o644)
	long := strings.Repeat("t/", 300)
	for name, target := range map[string]string{"out": outside, "a/up": "..", "long": long} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := takeSnapshot(context.Background(), root, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for p, st := range snap.files {
		got = append(got, fmt.Sprintf("%s %o", p, st.mode))
	}
	slices.Sort(got)
	want := []string{"a/up 120000", "a/x.txt 100644", "long 120000", "nested/y.txt 100644", "out 120000"}
	if !slices.Equal(got, want) {
		t.Errorf("snapshot:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if snap.files["long"].hash != sha256.Sum256([]byte(long)) {
		t.Error("the long link's target was not read whole")
	}
}
