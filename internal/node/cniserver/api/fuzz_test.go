package api

import (
	"bytes"
	"reflect"
	"testing"
)

// FuzzDecodeRequest feeds arbitrary bytes to the request decoder, both as a
// frame (ReadRequest) and as a bare body (DecodeRequest). It must never panic,
// and whatever it accepts must be valid and survive an encode/decode round
// trip unchanged.
func FuzzDecodeRequest(f *testing.F) {
	for _, r := range []*Request{addRequest(), {V: Version, Command: CmdStatus, Config: []byte(`{}`)}} {
		b, err := EncodeRequest(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[4:])
	}
	f.Add([]byte(`{"v":1,"command":"DEL","containerID":"c","ifName":"eth0","config":{"cniVersion":"0.4.0","name":"n"}}`))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(r *Request, err error) {
			if err != nil {
				return
			}
			if verr := r.Validate(); verr != nil {
				t.Fatalf("decoder accepted an invalid request: %v", verr)
			}
			frame, err := EncodeRequest(r)
			if err != nil {
				// A body that decoded can still be too large once the
				// config is re-encoded with escapes; nothing else may fail.
				if len(data) < MaxRequestSize/2 {
					t.Fatalf("re-encoding an accepted request: %v", err)
				}
				return
			}
			again, err := ReadRequest(bytes.NewReader(frame))
			if err != nil {
				t.Fatalf("decoding a re-encoded request: %v", err)
			}
			if !reflect.DeepEqual(r.Config == nil, again.Config == nil) || r.Command != again.Command ||
				r.ContainerID != again.ContainerID || r.Netns != again.Netns || r.IfName != again.IfName ||
				r.Args != again.Args || r.Path != again.Path || r.TimeoutMillis != again.TimeoutMillis {
				t.Fatalf("round trip changed the request:\n%+v\n%+v", r, again)
			}
		}
		check(ReadRequest(bytes.NewReader(data)))
		check(DecodeRequest(data))
	})
}
