package cniserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/multinet/multinet/internal/node/cniserver/api"
)

// peerHelperEnv makes the test binary a client: it sends one ADD to the
// socket named by the variable and prints the response as JSON.
const peerHelperEnv = "CNISERVER_TEST_PEER_CLIENT"

func TestMain(m *testing.M) {
	if sock := os.Getenv(peerHelperEnv); sock != "" {
		os.Exit(peerClient(sock))
	}
	os.Exit(m.Run())
}

func peerClient(sock string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := api.Dial(ctx, sock, request(api.CmdAdd))
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		return 2
	}
	if err := json.NewEncoder(os.Stdout).Encode(resp); err != nil {
		return 3
	}
	return 0
}

// peerCounter records OnPeerRefused.
type peerCounter struct {
	recorder
	pmu     sync.Mutex
	refused []uint32
}

func (p *peerCounter) OnPeerRefused(uid uint32) {
	p.pmu.Lock()
	defer p.pmu.Unlock()
	p.refused = append(p.refused, uid)
}

// A client that is not root on the node is refused by the server itself
// (SO_PEERCRED), even on a socket whose file modes would let it in: its
// request never reaches the handler, it gets a CNI error naming its uid,
// and the refusal is counted. Root is served on the same socket.
func TestPeerNotRootRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (it runs a client as uid 65534): run it as root")
	}
	// A world-reachable socket, so that only the peer check stands
	// between the client and the handler.
	dir := filepath.Join(t.TempDir(), "open")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if strings.HasPrefix(d, os.TempDir()) && d != filepath.Clean(os.TempDir()) {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	sock := filepath.Join(dir, "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	var handled atomic.Int32
	h := &stub{result: []byte(testResult), hook: func(context.Context, *api.Request) error { handled.Add(1); return nil }}
	obs := &peerCounter{}
	s := New(h, Options{Observer: obs})
	go func() { _ = s.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	// The test binary, copied where uid 65534 may run it.
	bin := filepath.Join(dir, "client")
	copyFile(t, os.Args[0], bin, 0o755)

	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), peerHelperEnv+"="+sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client as uid 65534: %v: %s", err, stderr.String())
	}
	var resp api.Response
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}
	if resp.Error == nil || !strings.Contains(resp.Error.Msg, "connection refused") || !strings.Contains(resp.Error.Details, "peer uid 65534") {
		t.Fatalf("non-root peer: response %+v, want a refusal naming uid 65534", resp)
	}
	if n := handled.Load(); n != 0 {
		t.Errorf("handler ran %d times for a refused peer", n)
	}
	obs.pmu.Lock()
	refused := append([]uint32(nil), obs.refused...)
	obs.pmu.Unlock()
	if len(refused) != 1 || refused[0] != 65534 {
		t.Errorf("OnPeerRefused calls %v, want [65534]", refused)
	}

	// Root (this process) is served.
	if resp := dial(t, sock, request(api.CmdAdd)); resp.Error != nil {
		t.Errorf("root peer: %+v", resp.Error)
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
