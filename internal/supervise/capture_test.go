package supervise

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestCaptureMatchesReference feeds random chunk sizes into captures of
// various sizes and compares with head/tail slices of the full output.
func TestCaptureMatchesReference(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, maxCap := range []int64{1, 2, 7, 10, 64, 1000} {
		for _, total := range []int{0, 1, 3, 5, 9, 10, 11, 63, 64, 65, 500, 999, 1000, 1001, 5000} {
			full := make([]byte, total)
			for i := range full {
				full[i] = byte('a' + i%26)
			}
			c := newCapture(maxCap)
			for rest := full; len(rest) > 0; {
				n := min(len(rest), 1+rng.IntN(int(maxCap)*2+3))
				c.write(rest[:n])
				rest = rest[n:]
			}
			got := c.result()
			headCap, tailCap := int(maxCap/2), int(maxCap-maxCap/2)
			wantHead := full[:min(total, headCap)]
			var wantTail []byte
			if total > headCap {
				wantTail = full[max(headCap, total-tailCap):]
			}
			name := fmt.Sprintf("max=%d total=%d", maxCap, total)
			if !bytes.Equal(got.Head, wantHead) || !bytes.Equal(got.Tail, wantTail) {
				t.Fatalf("%s: head %q tail %q, want %q %q", name, got.Head, got.Tail, wantHead, wantTail)
			}
			if got.Total != int64(total) || got.Truncated != (int64(total) > maxCap) {
				t.Fatalf("%s: total %d truncated %v", name, got.Total, got.Truncated)
			}
			if !got.Truncated && got.String() != string(full) {
				t.Fatalf("%s: String() = %q, want the full output", name, got.String())
			}
		}
	}
}

func TestCapturedString(t *testing.T) {
	t.Parallel()
	c := Captured{Head: []byte("abc"), Tail: []byte("xyz"), Total: 10, Truncated: true}
	if got, want := c.String(), "abc\n…[4 bytes omitted]…\nxyz"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := (Captured{Head: []byte("abc"), Total: 3}).String(); got != "abc" {
		t.Errorf("String() = %q, want %q", got, "abc")
	}
}

func TestCaptureMemoryIsBounded(t *testing.T) {
	t.Parallel()
	c := newCapture(1000)
	chunk := bytes.Repeat([]byte("x"), 333)
	for range 100 {
		c.write(chunk)
	}
	if cap(c.head) > 500 || len(c.ring) != 500 {
		t.Errorf("head cap %d, ring len %d; want at most 500 each", cap(c.head), len(c.ring))
	}
}

func TestStreamString(t *testing.T) {
	t.Parallel()
	for s, want := range map[Stream]string{Stdout: "stdout", Stderr: "stderr", 7: "Stream(7)"} {
		if got := s.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(s), got, want)
		}
	}
}
