// Package critest serves a CRI RuntimeService on a unix socket for tests of
// multinetd's CRI clients (the sandbox reaper, the runtime's CNI settings):
// a narrow stand-in for the runtime, never the proof that a feature works
// with a real one.
package critest

import (
	"net"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Serve serves svc (nil: a server with no RuntimeService, which answers
// Unimplemented) on a socket in a temporary directory until the test ends,
// and returns the socket's path.
func Serve(t *testing.T, svc runtimeapi.RuntimeServiceServer) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "cri.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	if svc != nil {
		runtimeapi.RegisterRuntimeServiceServer(srv, svc)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return sock
}
