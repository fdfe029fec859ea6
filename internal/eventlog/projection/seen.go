package projection

import (
	"hash/maphash"
	"iter"
	"unsafe"
)

// SeenIDs is the set of event ids the projection folded, each with the
// sequence of the stream that folded it. It holds one id per event ever
// folded: 1.2 million for 100,000 tasks, the projection's largest part.
// As a map of strings it cost an allocation per id, and the garbage
// collector marked every one of them at each cycle (22 % of the CPU of a
// 100,000-task refold); here the ids are packed into large blocks of
// bytes and found by their hash, and nothing holds a pointer, so the
// collector does not look inside. Ids are only ever added. The zero value
// is an empty set.
type SeenIDs struct {
	seed maphash.Seed
	// heads maps an id's hash to 1 + the newest of its entries with that
	// hash; older ones follow their next.
	heads   map[uint64]uint32
	entries []seenEntry
	// blocks hold the ids' bytes; a full block is never written again, so
	// strings made over it (All) stay valid.
	blocks [][]byte
}

type seenEntry struct {
	seq   uint64
	block uint32
	off   uint32
	n     uint32
	next  uint32 // 1 + an older entry of the same hash; 0 for none
}

// seenBlockSize is the size of the blocks of ids: big enough to be few, a
// small part of the set.
const seenBlockSize = 1 << 20

// Len is how many ids the set holds.
func (s *SeenIDs) Len() int { return len(s.entries) }

// Seq returns the sequence that folded id, and whether it was folded.
func (s *SeenIDs) Seq(id string) (uint64, bool) {
	if s.heads == nil {
		return 0, false // and no seed yet
	}
	return s.seqHashed(id, maphash.String(s.seed, id))
}

func (s *SeenIDs) seqHashed(id string, h uint64) (uint64, bool) {
	if i := s.find(id, h); i > 0 {
		return s.entries[i-1].seq, true
	}
	return 0, false
}

// Has reports whether id was folded.
func (s *SeenIDs) Has(id string) bool {
	_, ok := s.Seq(id)
	return ok
}

// All yields every id with its sequence, in the order they were added.
// An id is valid after the call too.
func (s *SeenIDs) All() iter.Seq2[string, uint64] {
	return func(yield func(string, uint64) bool) {
		for i := range s.entries {
			if !yield(s.id(&s.entries[i]), s.entries[i].seq) {
				return
			}
		}
	}
}

// put records that seq folded id, replacing the sequence of an id there
// already.
func (s *SeenIDs) put(id string, seq uint64) {
	if s.heads == nil {
		s.seed = maphash.MakeSeed()
		s.heads = map[uint64]uint32{}
	}
	s.putHashed(id, maphash.String(s.seed, id), seq)
}

// putHashed is put of an id whose hash is h.
func (s *SeenIDs) putHashed(id string, h uint64, seq uint64) {
	if i := s.find(id, h); i > 0 {
		s.entries[i-1].seq = seq
		return
	}
	b := len(s.blocks) - 1
	if b < 0 || len(s.blocks[b])+len(id) > cap(s.blocks[b]) {
		s.blocks = append(s.blocks, make([]byte, 0, max(seenBlockSize, len(id))))
		b++
	}
	off := len(s.blocks[b])
	s.blocks[b] = append(s.blocks[b], id...)
	s.entries = append(s.entries, seenEntry{seq: seq, block: uint32(b), off: uint32(off), n: uint32(len(id)), next: s.heads[h]})
	s.heads[h] = uint32(len(s.entries))
}

// find returns 1 + the entry of id, whose hash is h; 0 for none.
func (s *SeenIDs) find(id string, h uint64) uint32 {
	if s.heads == nil {
		return 0
	}
	for i := s.heads[h]; i > 0; i = s.entries[i-1].next {
		if s.id(&s.entries[i-1]) == id {
			return i
		}
	}
	return 0
}

// id is the string of an entry, over its block's bytes: blocks are
// appended to but their bytes never change.
func (s *SeenIDs) id(e *seenEntry) string {
	if e.n == 0 {
		return ""
	}
	return unsafe.String(&s.blocks[e.block][e.off], e.n)
}
