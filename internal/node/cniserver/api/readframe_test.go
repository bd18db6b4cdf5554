package api

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// A request of a few KiB (what the shim sends) is read into one buffer of
// its size: two allocations (the 4-byte length prefix, which escapes into
// the reader, and the body), no regrowth of a buffer already full (a
// bytes.Buffer read took 5).
func TestReadFrameSmallBodyOneBuffer(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 3000)
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	frame = append(frame, body...)
	r := bytes.NewReader(frame)
	allocs := testing.AllocsPerRun(100, func() {
		r.Reset(frame)
		got, err := readFrame(r, MaxRequestSize)
		if err != nil || len(got) != len(body) {
			t.Fatalf("readFrame: %d bytes, %v", len(got), err)
		}
	})
	if allocs > 2 {
		t.Errorf("readFrame of a %d-byte body: %.0f allocations, want 2 (prefix, body)", len(body), allocs)
	}
}
