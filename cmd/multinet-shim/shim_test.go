package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/multinet/multinet/internal/node/cniserver"
	"github.com/multinet/multinet/internal/node/cniserver/api"
	"github.com/multinet/multinet/internal/testing/cnitest"
)

// shimBin is the multinet-shim binary built by TestMain, exec'd as the
// container runtime would.
var shimBin string

func TestMain(m *testing.M) {
	bin, remove, err := cnitest.BuildStatic(".", "multinet-shim", "-trimpath", "-ldflags=-s -w")
	if err != nil {
		fmt.Fprintf(os.Stderr, "building multinet-shim: %v\n", err)
		os.Exit(1)
	}
	shimBin = bin
	code := m.Run()
	remove()
	os.Exit(code)
}

// handler is a cniserver.Handler that records requests and answers with
// result / err; block, if set, is waited on (or the request's end).
type handler struct {
	mu     sync.Mutex
	reqs   []*api.Request
	result string
	err    error
	block  chan struct{}
	stuck  bool       // keep waiting for block after the request's context ended
	ended  chan error // receives context.Cause when a blocked request ends
}

func (h *handler) do(ctx context.Context, r *api.Request) error {
	h.mu.Lock()
	h.reqs = append(h.reqs, r)
	h.mu.Unlock()
	if h.block != nil {
		select {
		case <-h.block:
		case <-ctx.Done():
			h.ended <- context.Cause(ctx)
			if !h.stuck {
				return fmt.Errorf("attaching: %w", ctx.Err())
			}
			<-h.block
		}
	}
	return h.err
}

func (h *handler) Add(ctx context.Context, r *api.Request) ([]byte, error) {
	if err := h.do(ctx, r); err != nil {
		return nil, err
	}
	return []byte(h.result), nil
}
func (h *handler) Del(ctx context.Context, r *api.Request) error    { return h.do(ctx, r) }
func (h *handler) Check(ctx context.Context, r *api.Request) error  { return h.do(ctx, r) }
func (h *handler) GC(ctx context.Context, r *api.Request) error     { return h.do(ctx, r) }
func (h *handler) Status(ctx context.Context, r *api.Request) error { return h.do(ctx, r) }

func (h *handler) requests() []*api.Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*api.Request(nil), h.reqs...)
}

// serve runs a cniserver with h on a socket in a temp dir and returns its path.
func serve(t *testing.T, h cniserver.Handler) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "multinetd.sock")
	serveAt(t, h, path)
	return path
}

// serveAt serves h on the socket path until the test ends.
func serveAt(t *testing.T, h cniserver.Handler, path string) {
	t.Helper()
	l, err := cniserver.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	s := cniserver.New(h, cniserver.Options{})
	go func() { _ = s.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
}

// netconf returns a CNI network configuration for the shim.
func netconf(cniVersion, socketPath string, extra string) []byte {
	return []byte(fmt.Sprintf(`{
  "cniVersion": %q,
  "name": "multinet",
  "type": "multinet-shim",
  "socketPath": %q%s
}`, cniVersion, socketPath, extra))
}

// cniEnv returns the CNI_* environment for cmd.
func cniEnv(cmd string) map[string]string {
	env := map[string]string{"CNI_COMMAND": cmd, "CNI_PATH": "/opt/cni/bin"}
	switch cmd {
	case "ADD", "CHECK", "DEL":
		env["CNI_CONTAINERID"] = "3f1c9a7e5b2d"
		env["CNI_IFNAME"] = "eth0"
		env["CNI_NETNS"] = "/var/run/netns/mnt-shim-absent"
		env["CNI_ARGS"] = "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_UID=9b2f"
	}
	return env
}

type run struct {
	stdout, stderr string
	exit           int
}

// execShim runs the shim binary with only env in its environment.
func execShim(t testing.TB, env map[string]string, stdin []byte) run {
	t.Helper()
	cmd := exec.Command(shimBin)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := run{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.exit = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("exec %s: %v", shimBin, err)
	}
	return r
}

// cniError parses the CNI error the shim printed (CNI spec "Error").
func cniError(t *testing.T, r run) *types.Error {
	t.Helper()
	if r.exit == 0 {
		t.Fatalf("shim exited 0, want failure; stdout %q", r.stdout)
	}
	var e types.Error
	if err := json.Unmarshal([]byte(r.stdout), &e); err != nil {
		t.Fatalf("stdout is not a CNI error: %v: %q (stderr %q)", err, r.stdout, r.stderr)
	}
	return &e
}

const addResult = `{"cniVersion":"1.1.0","interfaces":[{"name":"eth0","mac":"0a:58:0a:f4:01:07","sandbox":"/var/run/netns/mnt-shim-absent"}],"ips":[{"address":"10.244.1.7/24","gateway":"10.244.1.1","interface":0}],"dns":{}}`

// ADD forwards the CNI environment and stdin, and prints the daemon's
// result as is (CNI spec "ADD": result on stdout, exit 0).
func TestAddPrintsResult(t *testing.T) {
	h := &handler{result: addResult}
	sock := serve(t, h)
	stdin := netconf("1.1.0", sock, `, "args": {"cni": {"k": "v"}}`)
	env := cniEnv("ADD")
	r := execShim(t, env, stdin)
	if r.exit != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.exit, r.stdout, r.stderr)
	}
	if r.stdout != addResult {
		t.Errorf("stdout\n%s\nwant\n%s", r.stdout, addResult)
	}
	reqs := h.requests()
	if len(reqs) != 1 {
		t.Fatalf("daemon got %d requests, want 1", len(reqs))
	}
	got := reqs[0]
	want := api.Request{V: api.Version, Command: "ADD", ContainerID: env["CNI_CONTAINERID"], Netns: env["CNI_NETNS"],
		IfName: env["CNI_IFNAME"], Args: env["CNI_ARGS"], Path: env["CNI_PATH"]}
	gotFields := *got
	gotFields.Config, gotFields.TimeoutMillis = nil, 0
	if !reflect.DeepEqual(gotFields, want) {
		t.Errorf("daemon got %+v, want %+v", gotFields, want)
	}
	var a, b any
	_ = json.Unmarshal(stdin, &a)
	_ = json.Unmarshal(got.Config, &b)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("config arrived as %s, want %s", got.Config, stdin)
	}
	if got.TimeoutMillis <= 0 || got.TimeoutMillis > defaultTimeout.Milliseconds() {
		t.Errorf("timeoutMs %d, want (0, %d]", got.TimeoutMillis, defaultTimeout.Milliseconds())
	}
}

// The daemon's CNI error reaches the runtime with code, msg and details.
func TestDaemonErrorPreserved(t *testing.T) {
	want := types.NewError(types.ErrInvalidNetworkConfig, `network "default/sriov-a": NetworkAttachmentDefinition not found`, "spec §3.4.1")
	for _, cmd := range []string{"ADD", "DEL", "CHECK"} {
		t.Run(cmd, func(t *testing.T) {
			sock := serve(t, &handler{err: want})
			got := cniError(t, execShim(t, cniEnv(cmd), netconf("1.0.0", sock, "")))
			if !reflect.DeepEqual(got, want) {
				t.Errorf("error %+v, want %+v", got, want)
			}
		})
	}
}

// No daemon: never success (a DEL reported as success while the daemon is
// unreachable would leak the pod's addresses and devices). Code 11 for ADD/DEL/CHECK/GC,
// code 50 for STATUS (CNI spec "STATUS").
func TestNoDaemon(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "absent.sock")
	for _, tc := range []struct {
		cmd  string
		code uint
	}{{"ADD", 11}, {"DEL", 11}, {"CHECK", 11}, {"GC", 11}, {"STATUS", 50}} {
		t.Run(tc.cmd, func(t *testing.T) {
			// DEL and GC wait for multinetd until the timeout (1 s here).
			e := cniError(t, execShim(t, cniEnv(tc.cmd), netconf("1.1.0", sock, `, "timeout": "1s"`)))
			if e.Code != tc.code || !strings.Contains(e.Msg, sock) {
				t.Errorf("error %+v, want code %d naming %s", e, tc.code, sock)
			}
		})
	}
}

// DEL and GC wait for a restarting multinetd: the runtime sends them once
// (containerd's cleanup after a failed ADD), so a DEL sent while nothing
// listens is delivered when multinetd listens again, within the timeout.
// ADD and CHECK wait too while nothing listens (a rolling upgrade of the
// DaemonSet), but fail at once when the answer of a delivered
// request is lost (the kubelet retries ADD with a new sandbox).
func TestDelWaitsForRestartingDaemon(t *testing.T) {
	for _, cmd := range []string{"DEL", "GC", "ADD", "CHECK"} {
		t.Run(cmd, func(t *testing.T) {
			h := &handler{result: `{"cniVersion":"1.1.0"}`}
			dir := t.TempDir()
			sock := filepath.Join(dir, "multinetd.sock")
			done := make(chan run, 1)
			go func() { done <- execShim(t, cniEnv(cmd), netconf("1.1.0", sock, `, "timeout": "20s"`)) }()
			time.Sleep(700 * time.Millisecond)
			serveAt(t, h, sock)
			r := <-done
			if r.exit != 0 {
				t.Fatalf("%s while multinetd restarted: exit %d, stdout %s, stderr %s", cmd, r.exit, r.stdout, r.stderr)
			}
			if got := h.requests(); len(got) != 1 || got[0].Command != cmd {
				t.Errorf("multinetd got %v, want one %s", got, cmd)
			}
		})
	}
	// multinetd killed after taking the DEL, before answering: the DEL is
	// sent again to the next one.
	t.Run("DEL after a lost answer", func(t *testing.T) {
		h := &handler{}
		sock := filepath.Join(t.TempDir(), "multinetd.sock")
		dying, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan run, 1)
		go func() { done <- execShim(t, cniEnv("DEL"), netconf("1.1.0", sock, `, "timeout": "20s"`)) }()
		conn, err := dying.Accept()
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.Close() // took the request, died before answering
		_ = dying.Close()
		_ = os.Remove(sock)
		serveAt(t, h, sock)
		if r := <-done; r.exit != 0 {
			t.Fatalf("DEL after a lost answer: exit %d, stdout %s, stderr %s", r.exit, r.stdout, r.stderr)
		}
		if got := h.requests(); len(got) != 1 || got[0].Command != "DEL" {
			t.Errorf("multinetd got %v, want the DEL again", got)
		}
	})
	// multinetd killed after taking the ADD, before answering: not sent
	// again.
	t.Run("ADD after a lost answer", func(t *testing.T) {
		sock := filepath.Join(t.TempDir(), "multinetd.sock")
		dying, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer dying.Close()
		done := make(chan run, 1)
		go func() { done <- execShim(t, cniEnv("ADD"), netconf("1.1.0", sock, `, "timeout": "20s"`)) }()
		conn, err := dying.Accept()
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.Close()
		if e := cniError(t, <-done); e.Code != 11 {
			t.Errorf("ADD after a lost answer: %+v, want code 11", e)
		}
		if conn, err := acceptWithin(dying, 500*time.Millisecond); err == nil {
			_ = conn.Close()
			t.Errorf("ADD after a lost answer was sent again")
		}
	})
	// No multinetd at all: ADD fails with 11 once the timeout is over.
	sock := filepath.Join(t.TempDir(), "absent.sock")
	e := cniError(t, execShim(t, cniEnv("ADD"), netconf("1.1.0", sock, `, "timeout": "1s"`)))
	if e.Code != 11 || !strings.Contains(e.Msg, sock) {
		t.Errorf("ADD without multinetd: %+v, want code 11 naming %s", e, sock)
	}
}

// acceptWithin accepts one connection on l, giving up after d.
func acceptWithin(l net.Listener, d time.Duration) (net.Conn, error) {
	_ = l.(*net.UnixListener).SetDeadline(time.Now().Add(d))
	return l.Accept()
}

// STATUS passes the daemon's verdict through (CNI spec "STATUS": 50, 51).
func TestStatus(t *testing.T) {
	sock := serve(t, &handler{})
	if r := execShim(t, cniEnv("STATUS"), netconf("1.1.0", sock, "")); r.exit != 0 || r.stdout != "" {
		t.Errorf("ready daemon: exit %d stdout %q, want 0 and no output", r.exit, r.stdout)
	}
	want := types.NewError(51, "default network not available", "delegate ovn-k8s-cni-overlay: STATUS failed")
	sock = serve(t, &handler{err: want})
	if got := cniError(t, execShim(t, cniEnv("STATUS"), netconf("1.1.0", sock, ""))); !reflect.DeepEqual(got, want) {
		t.Errorf("error %+v, want %+v", got, want)
	}
}

// VERSION is answered by the shim alone (CNI spec "VERSION").
func TestVersion(t *testing.T) {
	h := &handler{}
	sock := serve(t, h)
	r := execShim(t, map[string]string{"CNI_COMMAND": "VERSION"}, netconf("1.1.0", sock, ""))
	if r.exit != 0 {
		t.Fatalf("exit %d, stdout %q", r.exit, r.stdout)
	}
	var v struct {
		CNIVersion        string   `json:"cniVersion"`
		SupportedVersions []string `json:"supportedVersions"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("stdout %q: %v", r.stdout, err)
	}
	want := []string{"0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}
	if !reflect.DeepEqual(v.SupportedVersions, want) {
		t.Errorf("supportedVersions %v, want %v", v.SupportedVersions, want)
	}
	if n := len(h.requests()); n != 0 {
		t.Errorf("VERSION sent %d requests to the daemon", n)
	}
}

// GC is forwarded with the runtime's cni.dev/valid-attachments intact.
func TestGCForwardsValidAttachments(t *testing.T) {
	h := &handler{}
	sock := serve(t, h)
	extra := `, "cni.dev/valid-attachments": [{"containerID": "3f1c9a7e5b2d", "ifname": "eth0"}]`
	if r := execShim(t, cniEnv("GC"), netconf("1.1.0", sock, extra)); r.exit != 0 {
		t.Fatalf("exit %d, stdout %q", r.exit, r.stdout)
	}
	reqs := h.requests()
	if len(reqs) != 1 || reqs[0].Command != "GC" || !strings.Contains(string(reqs[0].Config), `"cni.dev/valid-attachments":[{"containerID":"3f1c9a7e5b2d","ifname":"eth0"}]`) {
		t.Errorf("daemon got %+v", reqs)
	}
}

// A daemon that honours its request context answers before the shim's
// "timeout" with code 11 (the server shortens its deadline to fit, leaving
// a tenth of it, at most 1 s, to answer). The timeout is 3 s, so that the
// margin (300 ms) holds on a loaded machine: with 300 ms (a 30 ms margin)
// the shim gave up first in 1 of 10 runs under a parallel build.
func TestTimeoutDaemonAnswers(t *testing.T) {
	h := &handler{block: make(chan struct{}), ended: make(chan error, 1)}
	defer close(h.block)
	sock := serve(t, h)
	e := cniError(t, execShim(t, cniEnv("ADD"), netconf("1.0.0", sock, `, "timeout": "3s"`)))
	want := types.NewError(types.ErrTryAgainLater, "multinetd: ADD timed out", "attaching: context deadline exceeded")
	if !reflect.DeepEqual(e, want) {
		t.Errorf("error %+v, want %+v", e, want)
	}
}

// A stuck daemon: the shim gives up at "timeout" with code 11 naming it, and
// never reports success.
func TestTimeoutDaemonStuck(t *testing.T) {
	h := &handler{block: make(chan struct{}), stuck: true, ended: make(chan error, 1)}
	defer close(h.block)
	sock := serve(t, h)
	start := time.Now()
	e := cniError(t, execShim(t, cniEnv("DEL"), netconf("1.0.0", sock, `, "timeout": "300ms"`)))
	if e.Code != types.ErrTryAgainLater || !strings.Contains(e.Msg, "no answer") || !strings.Contains(e.Msg, "300ms") {
		t.Errorf("error %+v, want code 11 naming the 300ms timeout", e)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("shim took %s with a 300ms timeout", d)
	}
	select {
	case <-h.ended:
	case <-time.After(10 * time.Second):
		t.Error("daemon-side request context did not end")
	}
}

// CNI_NETNS naming the shim's own namespace is refused before the daemon
// acts on it (CNI error 8), for ADD and DEL.
func TestOwnNetnsRefused(t *testing.T) {
	for _, cmd := range []string{"ADD", "DEL"} {
		t.Run(cmd, func(t *testing.T) {
			h := &handler{result: addResult}
			sock := serve(t, h)
			env := cniEnv(cmd)
			env["CNI_NETNS"] = "/proc/self/ns/net"
			e := cniError(t, execShim(t, env, netconf("1.1.0", sock, "")))
			if e.Code != types.ErrInvalidNetNS {
				t.Errorf("error %+v, want code 8", e)
			}
			if n := len(h.requests()); n != 0 {
				t.Errorf("daemon got %d requests for the host netns", n)
			}
		})
	}
}

func TestLoadConfig(t *testing.T) {
	cases := []struct {
		name    string
		stdin   string
		want    config
		wantErr string
	}{
		{"defaults", `{"cniVersion":"1.1.0","name":"n"}`, config{api.DefaultSocketPath, defaultTimeout}, ""},
		{"set", `{"name":"n","socketPath":"/run/x/d.sock","timeout":"90s"}`, config{"/run/x/d.sock", 90 * time.Second}, ""},
		{"relative socket", `{"name":"n","socketPath":"d.sock"}`, config{}, `"socketPath"`},
		{"bad timeout", `{"name":"n","timeout":"2 minutes"}`, config{}, `"timeout"`},
		{"zero timeout", `{"name":"n","timeout":"0s"}`, config{}, `"timeout"`},
		{"negative timeout", `{"name":"n","timeout":"-1s"}`, config{}, `"timeout"`},
		{"timeout not a string", `{"name":"n","timeout":30}`, config{}, "decoding"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadConfig([]byte(tc.stdin))
			if tc.wantErr != "" {
				var e *types.Error
				if !errors.As(err, &e) || !strings.Contains(e.Msg, tc.wantErr) {
					t.Fatalf("got %v, want CNI error naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || *c != tc.want {
				t.Fatalf("got %+v, %v; want %+v", c, err, tc.want)
			}
		})
	}
}

// Configuration errors reach the runtime as CNI error 7 without a daemon.
func TestInvalidConfigExit(t *testing.T) {
	sock := serve(t, &handler{})
	e := cniError(t, execShim(t, cniEnv("ADD"), netconf("1.1.0", sock, `, "timeout": "soon"`)))
	if e.Code != types.ErrInvalidNetworkConfig || !strings.Contains(e.Msg, `"timeout"`) {
		t.Errorf("error %+v, want code 7 naming \"timeout\"", e)
	}
}

// BenchmarkExecVersion measures a VERSION exec of the stripped static shim
// (fork + exec + Go runtime start + skel).
func BenchmarkExecVersion(b *testing.B) {
	env := map[string]string{"CNI_COMMAND": "VERSION"}
	for b.Loop() {
		if r := execShim(b, env, nil); r.exit != 0 {
			b.Fatalf("exit %d", r.exit)
		}
	}
}

// BenchmarkExecAdd measures an ADD exec against a stub daemon: the whole
// shim overhead a pod sandbox pays.
func BenchmarkExecAdd(b *testing.B) {
	path := filepath.Join(b.TempDir(), "multinetd.sock")
	l, err := cniserver.Listen(path)
	if err != nil {
		b.Fatal(err)
	}
	s := cniserver.New(&handler{result: addResult}, cniserver.Options{})
	go func() { _ = s.Serve(l) }()
	defer s.Shutdown(context.Background())
	env := cniEnv("ADD")
	stdin := netconf("1.1.0", path, "")
	for b.Loop() {
		if r := execShim(b, env, stdin); r.exit != 0 {
			b.Fatalf("exit %d: %s", r.exit, r.stdout)
		}
	}
}

// The shim is exec'd for every sandbox operation: it must not pull in
// client-go, net/http, gRPC, Prometheus or klog: it stays a few MB and a few ms.
func TestImportsStaySmall(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"net/http", "k8s.io/", "sigs.k8s.io/", "google.golang.org/grpc", "github.com/prometheus/", "github.com/vishvananda/netlink"} {
			if dep == banned || strings.HasPrefix(dep, banned) {
				t.Errorf("multinet-shim depends on %s", dep)
			}
		}
	}
}
