package cniserver

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/multinet/multinet/internal/node/cnirequest"
	"github.com/multinet/multinet/internal/node/cniserver/api"
)

// stub is a Handler whose ADD returns result and every command returns err
// (when set), after calling hook (when set).
type stub struct {
	result []byte
	err    error
	hook   func(ctx context.Context, req *api.Request) error
}

func (s *stub) do(ctx context.Context, req *api.Request) error {
	if s.hook != nil {
		if err := s.hook(ctx, req); err != nil {
			return err
		}
	}
	return s.err
}

func (s *stub) Add(ctx context.Context, req *api.Request) ([]byte, error) {
	if err := s.do(ctx, req); err != nil {
		return nil, err
	}
	return s.result, nil
}
func (s *stub) Del(ctx context.Context, req *api.Request) error    { return s.do(ctx, req) }
func (s *stub) Check(ctx context.Context, req *api.Request) error  { return s.do(ctx, req) }
func (s *stub) GC(ctx context.Context, req *api.Request) error     { return s.do(ctx, req) }
func (s *stub) Status(ctx context.Context, req *api.Request) error { return s.do(ctx, req) }

// recorder is an Observer that records every call.
type recorder struct {
	mu     sync.Mutex
	starts []string
	dones  []string
	reads  []time.Duration
}

func (r *recorder) OnStart(cmd string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts = append(r.starts, cmd)
}

func (r *recorder) OnDone(cmd string, read, _, _ time.Duration, err *types.Error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reads = append(r.reads, read)
	code := "ok"
	if err != nil {
		code = fmt.Sprint(err.Code)
	}
	r.dones = append(r.dones, cmd+"="+code)
}

func (r *recorder) get() ([]string, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.starts...), append([]string(nil), r.dones...)
}

const testResult = `{"cniVersion":"1.1.0","interfaces":[{"name":"eth0","sandbox":"/var/run/netns/mnt-test"}],"ips":[{"address":"10.244.1.7/24","interface":0}]}`

// start serves h on a fresh socket in a temp dir and returns the socket path
// and the server; the server is shut down at cleanup.
func start(t testing.TB, h Handler, opts Options) (string, *Server) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run", "multinet", "multinetd.sock")
	l, err := Listen(path)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	s := New(h, opts)
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return path, s
}

func request(cmd string) *api.Request {
	return &api.Request{
		V:           api.Version,
		Command:     cmd,
		ContainerID: "c0ffee",
		Netns:       "/var/run/netns/mnt-test",
		IfName:      "eth0",
		Args:        "K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0",
		Path:        "/opt/cni/bin",
		Config:      json.RawMessage(`{"cniVersion":"1.1.0","name":"multinet","type":"multinet-shim"}`),
	}
}

func dial(t testing.TB, path string, req *api.Request) *api.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := api.Dial(ctx, path, req)
	if err != nil {
		t.Fatalf("Dial %s: %v", req.Command, err)
	}
	return resp
}

func TestListenPermissions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "multinet")
	path := filepath.Join(dir, "multinetd.sock")
	l, err := Listen(path)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	defer l.Close()
	for _, c := range []struct {
		path string
		mode fs.FileMode
		typ  fs.FileMode
	}{{dir, 0o700, fs.ModeDir}, {filepath.Dir(dir), 0o700, fs.ModeDir}, {path, 0o600, fs.ModeSocket}} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != c.mode || fi.Mode().Type() != c.typ {
			t.Errorf("%s: mode %s, want %s%s", c.path, fi.Mode(), c.typ, c.mode)
		}
	}
}

// An existing socket directory (the kubelet creates the hostPath 0755) is
// made 0700: the server owns it. A shared system directory is refused.
func TestListenMakesExistingDir0700(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := Listen(filepath.Join(dir, "s.sock"))
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	defer l.Close()
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("socket directory mode %s, want 0700", fi.Mode().Perm())
	}
	for _, shared := range []string{"/run/s.sock", "/tmp/s.sock", "/var/run/s.sock"} {
		if _, err := Listen(shared); err == nil || !strings.Contains(err.Error(), "shared with other programs") {
			t.Errorf("Listen(%s): %v, want a refusal of the shared directory", shared, err)
		}
	}
}

func TestListenStaleAndLive(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.sock")

	// A socket left by a dead daemon: bound, never listening.
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("stale socket not left behind: %v", err)
	}
	l, err := Listen(path)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	defer l.Close()

	// A live server keeps its socket.
	if _, err := Listen(path); err == nil || !strings.Contains(err.Error(), "another server") {
		t.Errorf("Listen over a live socket: got %v, want 'another server' error", err)
	}

	// A regular file is never removed.
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(file); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Listen over a regular file: got %v, want 'not a socket' error", err)
	}
	if _, err := os.Stat(file); err != nil {
		t.Errorf("regular file removed: %v", err)
	}

	if _, err := Listen("relative.sock"); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Errorf("Listen on a relative path: got %v, want 'absolute' error", err)
	}
}

func TestAddRoundTrip(t *testing.T) {
	var got *api.Request
	h := &stub{result: []byte(testResult), hook: func(_ context.Context, r *api.Request) error { got = r; return nil }}
	path, _ := start(t, h, Options{})
	req := request(api.CmdAdd)
	resp := dial(t, path, req)
	if resp.Error != nil {
		t.Fatalf("ADD: CNI error %+v", resp.Error)
	}
	if string(resp.Result) != testResult {
		t.Errorf("result %s, want %s", resp.Result, testResult)
	}
	if got == nil || got.ContainerID != req.ContainerID || got.Args != req.Args || got.Path != req.Path ||
		got.Netns != req.Netns || got.IfName != req.IfName || string(got.Config) != string(req.Config) {
		t.Errorf("handler saw %+v, want %+v", got, req)
	}
}

// Handler errors reach the client with code, msg and details (CNI spec
// "Error"); other errors and panics become code 999.
func TestHandlerErrors(t *testing.T) {
	cases := []struct {
		name   string
		cmd    string
		h      *stub
		want   *types.Error
		prefix bool // want.Msg is a prefix
	}{
		{"CNI error", api.CmdAdd, &stub{err: types.NewError(types.ErrInvalidNetworkConfig, "network \"sriov-a\": no NetworkAttachmentDefinition", "namespace default")},
			types.NewError(7, "network \"sriov-a\": no NetworkAttachmentDefinition", "namespace default"), false},
		{"wrapped CNI error", api.CmdDel, &stub{err: fmt.Errorf("deleting: %w", types.NewError(types.ErrTryAgainLater, "state dir busy", ""))},
			types.NewError(11, "state dir busy", ""), false},
		{"STATUS not ready (CNI spec STATUS: 50)", api.CmdStatus, &stub{err: types.NewError(50, "default network not ready", "")},
			types.NewError(50, "default network not ready", ""), false},
		{"plain error", api.CmdCheck, &stub{err: errors.New("interface net1 missing")},
			types.NewError(types.ErrInternal, "interface net1 missing", ""), false},
		{"ADD without result", api.CmdAdd, &stub{},
			types.NewError(types.ErrInternal, "multinetd: ADD handler returned no result", ""), false},
		{"ADD with invalid JSON result", api.CmdAdd, &stub{result: []byte(`{"cniVersion":`)},
			types.NewError(types.ErrInternal, "multinetd: cannot encode response", ""), true},
		{"panic", api.CmdGC, &stub{hook: func(context.Context, *api.Request) error { panic("boom") }},
			types.NewError(types.ErrInternal, "multinetd: GC handler panicked: boom", ""), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path, _ := start(t, tc.h, Options{})
			resp := dial(t, path, request(tc.cmd))
			if resp.Error == nil {
				t.Fatalf("got success %s, want error %+v", resp.Result, tc.want)
			}
			got := *resp.Error
			if tc.prefix {
				if got.Code != tc.want.Code || !strings.HasPrefix(got.Msg, tc.want.Msg) {
					t.Errorf("error %+v, want code %d msg %q…", got, tc.want.Code, tc.want.Msg)
				}
				return
			}
			if !reflect.DeepEqual(&got, tc.want) {
				t.Errorf("error %+v, want %+v", got, *tc.want)
			}
		})
	}
}

// rawExchange writes b to the server and reads one response.
func rawExchange(t *testing.T, path string, b []byte) *api.Response {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(b); err != nil {
		t.Fatalf("write: %v", err)
	}
	resp, err := api.ReadResponse(c)
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	return resp
}

func frame(body string) []byte {
	b := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(b, uint32(len(body)))
	copy(b[4:], body)
	return b
}

func TestMalformedRequests(t *testing.T) {
	rec := &recorder{}
	var calls atomic.Int32
	path, _ := start(t, &stub{result: []byte(testResult), hook: func(context.Context, *api.Request) error { calls.Add(1); return nil }},
		Options{Observer: rec})
	huge := make([]byte, 4)
	binary.BigEndian.PutUint32(huge, api.MaxRequestSize+1)
	cases := []struct {
		name  string
		input []byte
		code  uint
		want  string
	}{
		{"not JSON", frame(`ADD eth0 please`), types.ErrDecodingFailure, "decoding request"},
		{"wrong protocol version", frame(`{"v":2,"command":"STATUS","config":{}}`), types.ErrDecodingFailure, `"v"`},
		{"unknown command", frame(`{"v":1,"command":"VERSION","config":{}}`), types.ErrDecodingFailure, `"command"`},
		{"ADD without netns", frame(`{"v":1,"command":"ADD","containerID":"c","ifName":"eth0","config":{}}`), types.ErrDecodingFailure, `"netns"`},
		{"oversized", huge, types.ErrDecodingFailure, "1048577"},
		{"empty frame", []byte{0, 0, 0, 0}, types.ErrDecodingFailure, "empty frame"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := rawExchange(t, path, tc.input)
			if resp.Error == nil || resp.Error.Code != tc.code || !strings.Contains(resp.Error.Details, tc.want) {
				t.Fatalf("response %+v, want code %d with details mentioning %q", resp, tc.code, tc.want)
			}
		})
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("handler called %d times for malformed requests", n)
	}
	// The server still works.
	if resp := dial(t, path, request(api.CmdAdd)); resp.Error != nil {
		t.Fatalf("ADD after malformed requests: %+v", resp.Error)
	}
	starts, dones := rec.get()
	if want := []string{"INVALID", "INVALID", "INVALID", "INVALID", "INVALID", "INVALID", "ADD"}; !reflect.DeepEqual(starts, want) {
		t.Errorf("observer starts %v, want %v", starts, want)
	}
	if want := []string{"INVALID=6", "INVALID=6", "INVALID=6", "INVALID=6", "INVALID=6", "INVALID=6", "ADD=ok"}; !reflect.DeepEqual(dones, want) {
		t.Errorf("observer dones %v, want %v", dones, want)
	}
}

// The observer's read time runs from the connection's accept to the request
// read: a client that connects and waits before it sends is seen waiting.
func TestObserverReadTime(t *testing.T) {
	rec := &recorder{}
	path, _ := start(t, &stub{result: []byte(testResult)}, Options{Observer: rec})
	body, err := json.Marshal(request(api.CmdAdd))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const wait = 30 * time.Millisecond
	time.Sleep(wait)
	if _, err := conn.Write(frame(string(body))); err != nil {
		t.Fatal(err)
	}
	resp, err := api.ReadResponse(conn)
	if err != nil || resp.Error != nil {
		t.Fatalf("ADD: %v %+v", err, resp)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.reads) != 1 || rec.reads[0] < wait {
		t.Errorf("read times %v, want one of at least %s (the client's wait before sending)", rec.reads, wait)
	}
}

// A client that stops half-way through its request gets an I/O error (code 5)
// once ReadTimeout passes; the connection is released.
func TestSlowClient(t *testing.T) {
	rec := &recorder{}
	path, _ := start(t, &stub{result: []byte(testResult)}, Options{ReadTimeout: 100 * time.Millisecond, Observer: rec})
	full := frame(`{"v":1,"command":"STATUS","config":{}}`)
	resp := rawExchange(t, path, full[:10])
	if resp.Error == nil || resp.Error.Code != types.ErrIOFailure || !strings.Contains(resp.Error.Details, "timeout") {
		t.Fatalf("response %+v, want code 5 mentioning the timeout", resp)
	}

	// A connection that sends nothing and closes is not reported.
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if resp := dial(t, path, request(api.CmdStatus)); resp.Error != nil {
		t.Fatalf("STATUS: %+v", resp.Error)
	}
	if _, dones := rec.get(); !reflect.DeepEqual(dones, []string{"INVALID=5", "STATUS=ok"}) {
		t.Errorf("observer dones %v, want [INVALID=5 STATUS=ok]", dones)
	}
}

// At most MaxInFlight ADDs run at once, and MaxInFlight+ReservedInFlight
// requests of any command; the next waits, and fails with code 11 (try
// again later) if its deadline passes before a slot frees.
func TestConcurrencyBound(t *testing.T) {
	const limit, reserved = 2, 1
	var running, peak atomic.Int32
	entered := make(chan struct{}, 10)
	release := make(chan struct{})
	h := &stub{result: []byte(testResult), hook: func(ctx context.Context, r *api.Request) error {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		entered <- struct{}{}
		if r.ContainerID != "quick" {
			<-release
		}
		return nil
	}}
	path, _ := start(t, h, Options{MaxInFlight: limit, ReservedInFlight: reserved})

	var wg sync.WaitGroup
	errs := make(chan error, limit+reserved)
	send := func(cmd string) {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp, err := api.Dial(ctx, path, request(cmd))
			if err == nil && resp.Error != nil {
				err = resp.Error
			}
			errs <- err
		})
	}
	enter := func() {
		t.Helper()
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatal("a request did not reach the handler")
		}
	}
	for range limit {
		send(api.CmdAdd)
	}
	for range limit {
		enter()
	}

	// The ADD slots are full: an ADD with a short timeout waits and is
	// refused.
	req := request(api.CmdAdd)
	req.TimeoutMillis = 300
	resp := dial(t, path, req)
	if resp.Error == nil || resp.Error.Code != types.ErrTryAgainLater || !strings.Contains(resp.Error.Msg, "busy") ||
		!strings.Contains(resp.Error.Msg, fmt.Sprintf("one of %d slots", limit)) {
		t.Fatalf("ADD while the ADD slots are full: %+v, want code 11 busy naming %d slots", resp, limit)
	}

	// Every slot is full (a DEL took the reserved one): a DEL waits and is
	// refused too.
	send(api.CmdDel)
	enter()
	req = request(api.CmdDel)
	req.TimeoutMillis = 300
	resp = dial(t, path, req)
	if resp.Error == nil || resp.Error.Code != types.ErrTryAgainLater || !strings.Contains(resp.Error.Msg, "busy") ||
		!strings.Contains(resp.Error.Msg, fmt.Sprintf("one of %d slots", limit+reserved)) {
		t.Fatalf("DEL while full: %+v, want code 11 busy naming %d slots", resp, limit+reserved)
	}

	// A request with time to spare waits and runs once a slot frees.
	done := make(chan *api.Response)
	go func() {
		req := request(api.CmdCheck)
		req.ContainerID = "quick"
		done <- dial(t, path, req)
	}()
	close(release)
	if resp := <-done; resp.Error != nil {
		t.Fatalf("CHECK after release: %+v", resp.Error)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("request: %v", err)
		}
	}
	if p := peak.Load(); p > limit+reserved {
		t.Errorf("%d requests ran at once, limit %d", p, limit+reserved)
	}
}

// ADDs that do not return (their delegates hang) cannot take the capacity
// of the other commands: with every ADD slot held, DEL, CHECK, GC and STATUS
// still run at once, each in a reserved slot.
func TestReservedSlotsForOtherCommands(t *testing.T) {
	const limit, reserved = 2, 4
	release := make(chan struct{})
	addsIn := make(chan struct{}, limit)
	h := &stub{result: []byte(testResult), hook: func(ctx context.Context, r *api.Request) error {
		if r.Command == api.CmdAdd {
			addsIn <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	}}
	path, _ := start(t, h, Options{MaxInFlight: limit, ReservedInFlight: reserved})
	defer close(release)
	for range limit {
		go func() {
			req := request(api.CmdAdd)
			req.TimeoutMillis = 20000
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, _ = api.Dial(ctx, path, req)
		}()
	}
	for range limit {
		select {
		case <-addsIn:
		case <-time.After(10 * time.Second):
			t.Fatal("an ADD did not reach the handler")
		}
	}
	var wg sync.WaitGroup
	for _, cmd := range []string{api.CmdDel, api.CmdCheck, api.CmdGC, api.CmdStatus} {
		wg.Go(func() {
			req := request(cmd)
			req.TimeoutMillis = 2000
			if resp := dial(t, path, req); resp.Error != nil {
				t.Errorf("%s while every ADD slot is held: %+v", cmd, resp.Error)
			}
		})
	}
	wg.Wait()
}

// A handler that yields its slot while it waits lets another request run in
// it; it takes a slot again when it resumes, after the other gave it back.
func TestYieldGivesTheSlotBack(t *testing.T) {
	waiting := make(chan struct{})
	proceed := make(chan struct{})
	var order []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	h := &stub{result: []byte(testResult), hook: func(ctx context.Context, r *api.Request) error {
		if r.ContainerID != "waiter" {
			note("other ran")
			return nil
		}
		resume := cnirequest.Yield(ctx)
		close(waiting)
		<-proceed
		if err := resume(ctx); err != nil {
			return err
		}
		note("waiter resumed")
		return nil
	}}
	path, _ := start(t, h, Options{MaxInFlight: 1, ReservedInFlight: 1})

	done := make(chan *api.Response)
	go func() {
		req := request(api.CmdAdd)
		req.ContainerID = "waiter"
		done <- dial(t, path, req)
	}()
	<-waiting
	// The only ADD slot is free while the first ADD waits.
	req := request(api.CmdAdd)
	req.ContainerID = "other"
	req.TimeoutMillis = 2000
	if resp := dial(t, path, req); resp.Error != nil {
		t.Fatalf("ADD while the other yielded its slot: %+v", resp.Error)
	}
	close(proceed)
	if resp := <-done; resp.Error != nil {
		t.Fatalf("yielding ADD: %+v", resp.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(order, ", ") != "other ran, waiter resumed" {
		t.Errorf("order %q", order)
	}

	// Without a slot in the context, Yield does nothing.
	if err := cnirequest.Yield(context.Background())(context.Background()); err != nil {
		t.Errorf("Yield without a slot: %v", err)
	}
}

// A handler that yielded and cannot take a slot again before its deadline
// gets the context's cause from resume; the server answers, and a slot it
// never got back is not released twice.
func TestYieldResumeAtDeadline(t *testing.T) {
	hold := make(chan struct{})
	yielded, held := make(chan struct{}), make(chan struct{})
	resumed := make(chan error, 1)
	h := &stub{result: []byte(testResult), hook: func(ctx context.Context, r *api.Request) error {
		switch r.ContainerID {
		case "holder":
			close(held)
			<-hold
			return nil
		case "waiter":
			resume := cnirequest.Yield(ctx)
			close(yielded)
			select {
			case <-held:
			case <-ctx.Done():
			}
			err := resume(ctx)
			resumed <- err
			return err
		}
		return nil
	}}
	path, s := start(t, h, Options{MaxInFlight: 1, ReservedInFlight: 1})

	waiter := make(chan *api.Response)
	go func() {
		req := request(api.CmdAdd)
		req.ContainerID = "waiter"
		req.TimeoutMillis = 1000
		waiter <- dial(t, path, req)
	}()
	<-yielded
	go func() {
		req := request(api.CmdAdd)
		req.ContainerID = "holder"
		dial(t, path, req)
	}()
	select {
	case err := <-resumed:
		if err == nil || !strings.Contains(err.Error(), "deadline") {
			t.Errorf("resume at the deadline: %v, want the deadline named", err)
		}
	case <-time.After(10 * time.Second):
		close(hold)
		t.Fatal("the yielding handler did not resume")
	}
	if resp := <-waiter; resp.Error == nil || resp.Error.Code != types.ErrTryAgainLater {
		t.Errorf("waiter: %+v, want code 11", resp)
	}
	close(hold)
	deadline := time.Now().Add(5 * time.Second)
	for len(s.slots) != 0 || len(s.addSlots) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("slots still taken: %d of all, %d of ADD", len(s.slots), len(s.addSlots))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The handler's context ends at RequestTimeout, shortened by the client's
// own timeout less a margin, so the client receives the daemon's error.
func TestRequestDeadline(t *testing.T) {
	var deadline time.Time
	h := &stub{hook: func(ctx context.Context, r *api.Request) error {
		deadline, _ = ctx.Deadline()
		if r.Command == api.CmdAdd {
			<-ctx.Done()
			return fmt.Errorf("attaching: %w", ctx.Err())
		}
		return nil
	}, result: []byte(testResult)}
	path, _ := start(t, h, Options{RequestTimeout: 150 * time.Millisecond})

	req := request(api.CmdAdd)
	req.TimeoutMillis = 5000
	resp := dial(t, path, req)
	if resp.Error == nil || resp.Error.Code != types.ErrTryAgainLater || resp.Error.Msg != "multinetd: ADD timed out" ||
		resp.Error.Details != "attaching: context deadline exceeded" {
		t.Fatalf("ADD past RequestTimeout: %+v, want code 11 timed out, details from the handler", resp)
	}

	path2, _ := start(t, h, Options{RequestTimeout: time.Hour})
	req = request(api.CmdDel)
	req.TimeoutMillis = 5000
	before := time.Now()
	if resp := dial(t, path2, req); resp.Error != nil {
		t.Fatal(resp.Error)
	}
	after := time.Now()
	// 5 s client timeout, 0.5 s margin: the handler's deadline is 4.5 s
	// after the server read the request.
	const want = 4500 * time.Millisecond
	if deadline.Before(before.Add(want)) || deadline.After(after.Add(want)) {
		t.Errorf("handler deadline %s after sending, want %s after the server read the request (exchange took %s)",
			deadline.Sub(before), want, after.Sub(before))
	}
}

// A client that hangs up cancels its request's context.
func TestClientGoneCancels(t *testing.T) {
	cause := make(chan error, 1)
	entered := make(chan struct{})
	h := &stub{hook: func(ctx context.Context, _ *api.Request) error {
		close(entered)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	}}
	path, _ := start(t, h, Options{})
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	if err := api.WriteRequest(c, request(api.CmdDel)); err != nil {
		t.Fatal(err)
	}
	<-entered
	c.Close()
	select {
	case err := <-cause:
		if !errors.Is(err, errClientGone) {
			t.Errorf("cancellation cause %v, want errClientGone", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("handler context not cancelled after the client hung up")
	}
}

func TestShutdownGraceful(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	h := &stub{result: []byte(testResult), hook: func(context.Context, *api.Request) error {
		close(entered)
		<-release
		return nil
	}}
	path := filepath.Join(t.TempDir(), "s.sock")
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	s := New(h, Options{})
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()

	got := make(chan *api.Response, 1)
	go func() { got <- dial(t, path, request(api.CmdAdd)) }()
	<-entered

	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	if err := <-served; !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve: %v, want ErrServerClosed", err)
	}
	// No new connections once shut down.
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		t.Errorf("connection accepted after Shutdown")
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v while a request was in flight", err)
	default:
	}
	close(release)
	if resp := <-got; resp.Error != nil || string(resp.Result) != testResult {
		t.Errorf("in-flight ADD: %+v", resp)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

func TestShutdownForced(t *testing.T) {
	cancelled := make(chan struct{})
	entered := make(chan struct{})
	h := &stub{hook: func(ctx context.Context, _ *api.Request) error {
		close(entered)
		<-ctx.Done()
		close(cancelled)
		return ctx.Err()
	}}
	path := filepath.Join(t.TempDir(), "s.sock")
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	s := New(h, Options{})
	go func() { _ = s.Serve(l) }()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = api.Dial(ctx, path, request(api.CmdDel))
	}()
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown: %v, want DeadlineExceeded", err)
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("handler context not cancelled by a forced Shutdown")
	}
}

// Serve after Shutdown returns at once.
func TestServeAfterShutdown(t *testing.T) {
	s := New(&stub{}, Options{})
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	l, err := Listen(filepath.Join(t.TempDir(), "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(l); !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve after Shutdown: %v", err)
	}
	// The listener was closed.
	if _, err := l.Accept(); err == nil || errors.Is(err, io.EOF) {
		t.Errorf("listener still open: %v", err)
	}
}
