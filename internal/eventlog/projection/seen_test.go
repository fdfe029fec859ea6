package projection

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestSeenIDs checks the set against a map of the same ids: random ids of
// any length (empty, and longer than a block), repeated ones replacing
// their sequence, across several blocks.
func TestSeenIDs(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var s SeenIDs
	want := map[string]uint64{}
	var order []string
	add := func(id string, seq uint64) {
		if _, ok := want[id]; !ok {
			order = append(order, id)
		}
		want[id] = seq
		s.put(id, seq)
	}
	if _, ok := s.Seq("x"); ok || s.Len() != 0 {
		t.Fatal("the empty set has an id")
	}
	add("", 7)
	add(strings.Repeat("z", seenBlockSize+3), 8)
	for i := range 300_000 {
		id := fmt.Sprintf("attempt_reported:f-%d/t%d/%d:%d", r.IntN(50), r.IntN(20_000), r.IntN(3), r.Uint64())
		if i%10 == 0 && len(order) > 0 {
			id = order[r.IntN(len(order))] // seen again: the sequence is replaced
		}
		add(id, uint64(i+10))
	}
	if len(s.blocks) < 10 {
		t.Fatalf("the test should span many blocks: %d", len(s.blocks))
	}
	if s.Len() != len(want) {
		t.Fatalf("Len %d, want %d", s.Len(), len(want))
	}
	for id, seq := range want {
		if got, ok := s.Seq(id); !ok || got != seq {
			t.Fatalf("Seq(%.40q) = %d, %v; want %d", id, got, ok, seq)
		}
	}
	for _, id := range []string{"attempt_reported", "x", strings.Repeat("z", seenBlockSize+2)} {
		if s.Has(id) {
			t.Fatalf("Has(%.40q) of an id never added", id)
		}
	}
	got := map[string]uint64{}
	i := 0
	for id, seq := range s.All() {
		if id != order[i] {
			t.Fatalf("All's id %d is %.40q, want %.40q (the order added)", i, id, order[i])
		}
		got[id] = seq
		i++
	}
	if !maps.Equal(got, want) {
		t.Fatal("All differs from the ids added")
	}
}

// TestSeenIDsCollisions gives different ids the same hash: each keeps its
// own sequence, and an id of that hash never added is not found.
func TestSeenIDsCollisions(t *testing.T) {
	var s SeenIDs
	s.put("seed the set", 1)
	const h = 42
	for i := range 100 {
		s.putHashed(fmt.Sprint("id-", i), h, uint64(100+i))
	}
	s.putHashed("id-7", h, 7) // replaced, not added
	for i := range 100 {
		want := uint64(100 + i)
		if i == 7 {
			want = 7
		}
		if seq, ok := s.seqHashed(fmt.Sprint("id-", i), h); !ok || seq != want {
			t.Fatalf("id-%d: %d, %v; want %d", i, seq, ok, want)
		}
	}
	if _, ok := s.seqHashed("id-100", h); ok {
		t.Fatal("an id never added was found among its hash's")
	}
	if s.Len() != 101 {
		t.Fatalf("Len %d, want 101", s.Len())
	}
}
