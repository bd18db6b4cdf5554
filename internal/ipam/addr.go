package ipam

import (
	"encoding/binary"
	"math"
	"net/netip"
)

// maxCount saturates address counts: larger ranges (IPv6) count as this.
const maxCount = math.MaxInt64

// lastAddr is the last address of prefix p (host bits all ones).
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	bits := p.Bits()
	for i := range b {
		for k := 0; k < 8; k++ {
			if i*8+k >= bits {
				b[i] |= 0x80 >> k
			}
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// hi64lo64 splits a 16-byte address into two big-endian halves.
func hi64lo64(a netip.Addr) (hi, lo uint64) {
	b := a.As16()
	return binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
}

// distance is b-a, saturated at maxCount; a must not be after b and both of
// one family.
func distance(a, b netip.Addr) uint64 {
	ah, al := hi64lo64(a)
	bh, bl := hi64lo64(b)
	lo := bl - al
	borrow := uint64(0)
	if bl < al {
		borrow = 1
	}
	if bh-ah-borrow != 0 || lo > maxCount {
		return maxCount
	}
	return lo
}

// add returns a+n (no overflow check: callers stay inside a range).
func add(a netip.Addr, n uint64) netip.Addr {
	h, l := hi64lo64(a)
	nl := l + n
	if nl < l {
		h++
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], h)
	binary.BigEndian.PutUint64(b[8:], nl)
	out := netip.AddrFrom16(b)
	if a.Is4() {
		return out.Unmap()
	}
	return out
}

// size is the number of addresses of r, saturated at maxCount.
func (r Range) size() uint64 {
	d := distance(r.Start, r.End)
	if d == maxCount {
		return maxCount
	}
	return d + 1
}

// size is the number of addresses of the set's ranges, saturated.
func (s RangeSet) size() uint64 {
	var n uint64
	for _, r := range s {
		n += r.size()
		if n >= maxCount {
			return maxCount
		}
	}
	return n
}

// at returns the address at offset off (< size) of the set and its range index.
func (s RangeSet) at(off uint64) (netip.Addr, int) {
	for i, r := range s {
		n := r.size()
		if off < n {
			return add(r.Start, off), i
		}
		off -= n
	}
	return s[0].Start, 0
}

// cursor walks a range set's addresses once each, in the order of a
// permutation: from offset start, stride addresses at a time (stride and
// the set's size coprime), wrapping around. Two searches with different
// strides part after their first common address, instead of probing the
// same run of taken addresses one after the other.
type cursor struct {
	set               RangeSet
	size, off, stride uint64
	left              uint64 // addresses not returned yet
}

func newCursor(s RangeSet, start, stride uint64) *cursor {
	n := s.size()
	stride %= n
	if stride == 0 {
		stride = 1
	}
	for gcd(stride, n) != 1 {
		stride++
	}
	return &cursor{set: s, size: n, off: start % n, stride: stride, left: n}
}

// next returns the next address and its range, false when every address
// was returned.
func (c *cursor) next() (netip.Addr, Range, bool) {
	if c.left == 0 {
		return netip.Addr{}, Range{}, false
	}
	c.left--
	a, ri := c.set.at(c.off)
	c.off += c.stride // < 2^64: both below size <= maxCount
	if c.off >= c.size {
		c.off -= c.size
	}
	return a, c.set[ri], true
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
