package sandboxes

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/multinet/multinet/internal/testing/critest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// runtime is a CRI RuntimeService that answers ListPodSandbox only.
type runtime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	items []*runtimeapi.PodSandbox
}

func (r *runtime) ListPodSandbox(context.Context, *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	return &runtimeapi.ListPodSandboxResponse{Items: r.items}, nil
}

// serve serves svc (nil: no RuntimeService) and returns the socket path.
func serve(t *testing.T, svc runtimeapi.RuntimeServiceServer) string {
	t.Helper()
	return critest.Serve(t, svc)
}

func sandbox(id, ns, name string, state runtimeapi.PodSandboxState) *runtimeapi.PodSandbox {
	return &runtimeapi.PodSandbox{Id: id, State: state,
		Metadata: &runtimeapi.PodSandboxMetadata{Namespace: ns, Name: name, Uid: "u-" + id}}
}

func ids(t *testing.T, endpoint string, self *Pod) (map[string]bool, error) {
	t.Helper()
	l, err := New(endpoint, self)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return l.IDs(ctx)
}

func TestIDsListsEverySandboxReadyOrNot(t *testing.T) {
	sock := serve(t, &runtime{items: []*runtimeapi.PodSandbox{
		sandbox("a1", "ns", "web", runtimeapi.PodSandboxState_SANDBOX_READY),
		sandbox("b2", "ns", "db", runtimeapi.PodSandboxState_SANDBOX_NOTREADY),
	}})
	for _, endpoint := range []string{"unix://" + sock, sock} {
		got, err := ids(t, endpoint, nil)
		if err != nil {
			t.Fatalf("%s: %v", endpoint, err)
		}
		if len(got) != 2 || !got["a1"] || !got["b2"] {
			t.Errorf("%s: IDs = %v, want a1 and b2", endpoint, got)
		}
	}
}

// With self set, a runtime that does not list multinetd's own pod is not
// this node's pod runtime: an error, never an empty list.
func TestIDsRequiresOwnPodWhenSelfIsSet(t *testing.T) {
	self := &Pod{Namespace: "multinet-system", Name: "multinetd-x"}
	other := serve(t, &runtime{items: []*runtimeapi.PodSandbox{sandbox("a1", "ns", "web", runtimeapi.PodSandboxState_SANDBOX_READY)}})
	if got, err := ids(t, other, self); err == nil || !strings.Contains(err.Error(), "none of multinetd's own pod multinet-system/multinetd-x") {
		t.Errorf("runtime without our pod: IDs = %v, %v; want the not-this-runtime error", got, err)
	}
	empty := serve(t, &runtime{})
	if _, err := ids(t, empty, self); err == nil {
		t.Error("runtime with no sandboxes: want an error, got none")
	}
	ours := serve(t, &runtime{items: []*runtimeapi.PodSandbox{
		sandbox("a1", "ns", "web", runtimeapi.PodSandboxState_SANDBOX_READY),
		sandbox("m1", "multinet-system", "multinetd-x", runtimeapi.PodSandboxState_SANDBOX_READY),
	}})
	got, err := ids(t, ours, self)
	if err != nil || len(got) != 2 {
		t.Errorf("runtime with our pod: IDs = %v, %v; want 2 IDs", got, err)
	}
}

func TestIDsFailsWithoutCRI(t *testing.T) {
	noCRI := serve(t, nil) // e.g. Docker's containerd: the CRI plugin disabled
	if _, err := ids(t, noCRI, nil); err == nil || !strings.Contains(err.Error(), "ListPodSandbox") {
		t.Errorf("no RuntimeService: err = %v, want a ListPodSandbox error", err)
	}
	if _, err := ids(t, filepath.Join(t.TempDir(), "missing.sock"), nil); err == nil {
		t.Error("missing socket: want an error, got none")
	}
}

func TestNewRejectsBadEndpoints(t *testing.T) {
	for _, e := range []string{"", "unix://", "tcp://127.0.0.1:1", "run/containerd.sock"} {
		if l, err := New(e, nil); err == nil {
			_ = l.Close()
			t.Errorf("New(%q): want an error", e)
		}
	}
}
