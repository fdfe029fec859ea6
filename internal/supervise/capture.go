package supervise

// capture keeps the first headCap and the last tailCap bytes of a stream and
// counts the rest. Its memory never exceeds headCap+tailCap, whatever is
// written; both halves are allocated lazily so short outputs stay cheap.
// It is not safe for concurrent use: each stream's reader owns its capture.
type capture struct {
	headCap, tailCap int
	head             []byte
	ring             []byte // len tailCap once allocated
	pos              int    // next write position in ring
	full             bool   // ring has wrapped at least once
	total            int64
}

func newCapture(max int64) *capture {
	h := int(max / 2)
	return &capture{headCap: h, tailCap: int(max) - h}
}

func (c *capture) write(p []byte) {
	c.total += int64(len(p))
	if room := c.headCap - len(c.head); room > 0 {
		n := min(room, len(p))
		if need := len(c.head) + n; need > cap(c.head) {
			// Grow by hand rather than by append so the head never holds
			// more than headCap bytes of backing array; start small because
			// most CLI stderr is tiny.
			grown := make([]byte, len(c.head), min(c.headCap, max(need, 2*cap(c.head), 4096)))
			copy(grown, c.head)
			c.head = grown
		}
		c.head = append(c.head, p[:n]...)
		p = p[n:]
	}
	if len(p) == 0 || c.tailCap == 0 {
		return
	}
	if c.ring == nil {
		c.ring = make([]byte, c.tailCap)
	}
	if len(p) >= c.tailCap {
		// The chunk alone fills the tail: keep its last tailCap bytes.
		copy(c.ring, p[len(p)-c.tailCap:])
		c.pos, c.full = 0, true
		return
	}
	n := copy(c.ring[c.pos:], p)
	if n < len(p) {
		copy(c.ring, p[n:])
		c.full = true
	}
	c.pos = (c.pos + len(p)) % c.tailCap
	if c.pos == 0 {
		c.full = true
	}
}

// result copies the capture out; the Captured shares no memory with c.
func (c *capture) result() Captured {
	out := Captured{Total: c.total, Head: append([]byte(nil), c.head...)}
	switch {
	case c.ring == nil:
	case c.full:
		out.Tail = make([]byte, 0, c.tailCap)
		out.Tail = append(out.Tail, c.ring[c.pos:]...)
		out.Tail = append(out.Tail, c.ring[:c.pos]...)
	default:
		out.Tail = append([]byte(nil), c.ring[:c.pos]...)
	}
	out.Truncated = out.Total > int64(len(out.Head)+len(out.Tail))
	return out
}
