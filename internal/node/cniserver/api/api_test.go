package api

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
)

func addRequest() *Request {
	return &Request{
		V:           Version,
		Command:     CmdAdd,
		ContainerID: "0123456789abcdef",
		Netns:       "/var/run/netns/mnt-test",
		IfName:      "eth0",
		Args:        "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_UID=4f6c",
		Path:        "/opt/cni/bin",
		Config:      json.RawMessage(`{"cniVersion":"1.1.0","name":"multinet","type":"multinet-shim","socketPath":"/run/multinet/multinetd.sock"}`),
	}
}

func TestRequestRoundTrip(t *testing.T) {
	for _, cmd := range []string{CmdAdd, CmdDel, CmdCheck, CmdGC, CmdStatus} {
		t.Run(cmd, func(t *testing.T) {
			in := addRequest()
			in.Command = cmd
			in.TimeoutMillis = 120000
			var buf bytes.Buffer
			if err := WriteRequest(&buf, in); err != nil {
				t.Fatalf("WriteRequest: %v", err)
			}
			if got := binary.BigEndian.Uint32(buf.Bytes()); int(got) != buf.Len()-4 {
				t.Fatalf("length prefix %d, body %d bytes", got, buf.Len()-4)
			}
			out, err := ReadRequest(&buf)
			if err != nil {
				t.Fatalf("ReadRequest: %v", err)
			}
			if !reflect.DeepEqual(in, out) {
				t.Fatalf("round trip changed the request:\n in: %+v\nout: %+v", in, out)
			}
		})
	}
}

// The config from stdin may be indented and contain characters encoding/json
// escapes for HTML by default; it must arrive semantically unchanged and
// without \u003c escapes.
func TestRequestConfigPreserved(t *testing.T) {
	in := addRequest()
	in.Config = json.RawMessage("\n  {\n \"cniVersion\": \"1.0.0\", \"name\": \"a<b>&c\", \"type\": \"multinet-shim\" }\n")
	frame, err := EncodeRequest(in)
	if err != nil {
		t.Fatalf("EncodeRequest: %v", err)
	}
	if bytes.Contains(frame, []byte(`\u003c`)) {
		t.Errorf("frame escapes HTML characters: %s", frame[4:])
	}
	out, err := ReadRequest(bytes.NewReader(frame))
	if err != nil {
		t.Fatalf("ReadRequest: %v", err)
	}
	var a, b any
	if err := json.Unmarshal(in.Config, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out.Config, &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("config changed in transit: %s -> %s", in.Config, out.Config)
	}
}

func TestResponseRoundTrip(t *testing.T) {
	cases := []*Response{
		{V: Version, Result: json.RawMessage(`{"cniVersion":"1.1.0","interfaces":[{"name":"eth0"}],"ips":[{"address":"10.1.2.3/24","interface":0}]}`)},
		{V: Version},
		{V: Version, Error: &types.Error{Code: 7, Msg: "invalid network config", Details: "network \"macvlan-a\": no such NetworkAttachmentDefinition"}},
		{V: Version, Error: &types.Error{Code: 50, Msg: "default network not ready"}},
	}
	for _, in := range cases {
		var buf bytes.Buffer
		if err := WriteResponse(&buf, in); err != nil {
			t.Fatalf("WriteResponse(%+v): %v", in, err)
		}
		out, err := ReadResponse(&buf)
		if err != nil {
			t.Fatalf("ReadResponse: %v", err)
		}
		if !reflect.DeepEqual(in, out) {
			t.Errorf("round trip changed the response:\n in: %+v\nout: %+v", in, out)
		}
	}
}

func TestRequestValidate(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(*Request)
		wantErr string // substring naming the field; "" = valid
	}{
		{"valid ADD", func(*Request) {}, ""},
		{"DEL without netns (CNI spec: CNI_NETNS optional for DEL)", func(r *Request) { r.Command = CmdDel; r.Netns = "" }, ""},
		{"GC needs no container (CNI spec GC)", func(r *Request) { r.Command = CmdGC; r.ContainerID, r.IfName, r.Netns = "", "", "" }, ""},
		{"STATUS needs no container (CNI spec STATUS)", func(r *Request) { r.Command = CmdStatus; r.ContainerID, r.IfName, r.Netns = "", "", "" }, ""},
		{"wrong version", func(r *Request) { r.V = 2 }, `"v"`},
		{"missing version", func(r *Request) { r.V = 0 }, `"v"`},
		{"missing command", func(r *Request) { r.Command = "" }, `"command"`},
		{"VERSION is not forwarded", func(r *Request) { r.Command = "VERSION" }, `"command"`},
		{"lower-case command", func(r *Request) { r.Command = "add" }, `"command"`},
		{"ADD without containerID", func(r *Request) { r.ContainerID = "" }, `"containerID"`},
		{"DEL without ifName", func(r *Request) { r.Command = CmdDel; r.IfName = "" }, `"ifName"`},
		{"ADD without netns", func(r *Request) { r.Netns = "" }, `"netns"`},
		{"CHECK without netns", func(r *Request) { r.Command = CmdCheck; r.Netns = "" }, `"netns"`},
		{"config missing", func(r *Request) { r.Config = nil }, `"config"`},
		{"config is an array", func(r *Request) { r.Config = json.RawMessage(`[1]`) }, `"config"`},
		{"negative timeout", func(r *Request) { r.TimeoutMillis = -1 }, `"timeoutMs"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := addRequest()
			tc.mutate(r)
			err := r.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: unexpected error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate: error %v, want one naming %s", err, tc.wantErr)
			}
			if _, err := EncodeRequest(r); err == nil {
				t.Errorf("EncodeRequest accepted an invalid request")
			}
		})
	}
}

func frame(body string) []byte {
	b := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(b, uint32(len(body)))
	copy(b[4:], body)
	return b
}

func TestReadRequestErrors(t *testing.T) {
	huge := make([]byte, 4)
	binary.BigEndian.PutUint32(huge, MaxRequestSize+1)
	cases := []struct {
		name  string
		input []byte
		is    error
		want  string
	}{
		{"empty stream", nil, io.EOF, "length prefix"},
		{"short prefix", []byte{0, 0}, io.ErrUnexpectedEOF, "length prefix"},
		{"zero length", []byte{0, 0, 0, 0}, nil, "empty frame"},
		{"oversized", huge, ErrFrameTooLarge, "1048577"},
		{"truncated body", frame(`{"v":1}`)[:8], io.ErrUnexpectedEOF, "body (4 of 7 bytes)"},
		{"not JSON", frame(`ADD please`), nil, "decoding request"},
		{"JSON but invalid", frame(`{"v":1,"command":"ADD"}`), nil, `"containerID"`},
		{"config not an object", frame(`{"v":1,"command":"STATUS","config":"x"}`), nil, `"config"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadRequest(bytes.NewReader(tc.input))
			if err == nil {
				t.Fatal("ReadRequest accepted malformed input")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v does not wrap %v", err, tc.is)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

func TestEncodeRequestTooLarge(t *testing.T) {
	r := addRequest()
	r.Config = json.RawMessage(`{"name":"` + strings.Repeat("x", MaxRequestSize) + `"}`)
	if _, err := EncodeRequest(r); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("EncodeRequest: got %v, want ErrFrameTooLarge", err)
	}
}

func TestResponseValidate(t *testing.T) {
	if err := (&Response{V: Version, Result: json.RawMessage(`[1]`)}).Validate(); err == nil || !strings.Contains(err.Error(), `"result"`) {
		t.Errorf("array result: got %v, want error naming \"result\"", err)
	}
	if err := (&Response{V: 3}).Validate(); err == nil || !strings.Contains(err.Error(), `"v"`) {
		t.Errorf("version 3: got %v, want error naming \"v\"", err)
	}
	if _, err := ReadResponse(bytes.NewReader(frame(`{"v":1,"result":"yes"}`))); err == nil {
		t.Errorf("ReadResponse accepted a string result")
	}
}

// serveOnce answers one connection on a real unix socket with fn.
func serveOnce(t *testing.T, fn func(net.Conn)) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { l.Close(); <-done })
	go func() {
		defer close(done)
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		fn(c)
	}()
	return path
}

func TestDial(t *testing.T) {
	want := &Response{V: Version, Result: json.RawMessage(`{"cniVersion":"1.1.0"}`)}
	var got *Request
	path := serveOnce(t, func(c net.Conn) {
		r, err := ReadRequest(c)
		if err != nil {
			t.Errorf("server ReadRequest: %v", err)
			return
		}
		got = r
		_ = WriteResponse(c, want)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := Dial(ctx, path, addRequest())
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("response %+v, want %+v", resp, want)
	}
	if got == nil || got.TimeoutMillis <= 0 || got.TimeoutMillis > 5000 {
		t.Errorf("request carried timeoutMs %v, want the context's remaining time (0, 5000]", got)
	}
}

func TestDialNoServer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent.sock")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := Dial(ctx, path, addRequest()); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Dial to a missing socket: got %v, want an error naming the socket", err)
	}
}

// A server that reads the request and never answers: Dial must return when
// the context ends, with an error wrapping context.DeadlineExceeded.
func TestDialDeadline(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	path := serveOnce(t, func(c net.Conn) {
		_, _ = ReadRequest(c)
		<-release
	})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := Dial(ctx, path, addRequest())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial: got %v, want context.DeadlineExceeded", err)
	}
}

// Cancellation without a deadline also unblocks Dial.
func TestDialCancel(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	read := make(chan struct{})
	path := serveOnce(t, func(c net.Conn) {
		_, _ = ReadRequest(c)
		close(read)
		<-release
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-read; cancel() }()
	_, err := Dial(ctx, path, addRequest())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Dial: got %v, want context.Canceled", err)
	}
}

// A server that rejects the request early (oversized, before reading the
// body) and closes: Dial returns the server's answer, not the write error.
func TestDialEarlyAnswer(t *testing.T) {
	want := ErrorResponse(types.ErrDecodingFailure, "too large", "")
	path := serveOnce(t, func(c net.Conn) {
		var hdr [4]byte
		_, _ = io.ReadFull(c, hdr[:])
		_ = WriteResponse(c, want)
	})
	r := addRequest()
	r.Config = json.RawMessage(`{"name":"` + strings.Repeat("x", MaxRequestSize-1000) + `"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := Dial(ctx, path, r)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("response %+v, want %+v", resp, want)
	}
}

func TestRequestTimeout(t *testing.T) {
	for _, tc := range []struct {
		ms   int64
		want time.Duration
	}{{0, 0}, {1500, 1500 * time.Millisecond}, {1 << 62, time.Duration(1<<63 - 1)}} {
		if got := (&Request{TimeoutMillis: tc.ms}).Timeout(); got != tc.want {
			t.Errorf("Timeout() with timeoutMs %d = %s, want %s", tc.ms, got, tc.want)
		}
	}
}
