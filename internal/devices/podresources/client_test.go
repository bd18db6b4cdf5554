package podresources

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// getMode is how the fake kubelet answers Get.
type getMode int

const (
	getServed        getMode = iota // like kubelet ≥ 1.34 (KubeletPodResourcesGet on)
	getUnimplemented                // like kubelet < 1.27: no such method
	getDisabled                     // like kubelet 1.27–1.33 with the gate off
	getBlocks                       // hangs until the call's deadline
)

// fakeKubelet serves the PodResources v1 API the way kubelet's
// server_v1.go does, from a fixed list of pods.
type fakeKubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	pods     []*podresourcesv1.PodResources
	get      getMode
	gets     atomic.Int32
	lists    atomic.Int32
	srv      *grpc.Server
	socket   string
	stopped  chan struct{}
	listWait bool // List hangs too
}

func (k *fakeKubelet) Get(ctx context.Context, req *podresourcesv1.GetPodResourcesRequest) (*podresourcesv1.GetPodResourcesResponse, error) {
	k.gets.Add(1)
	switch k.get {
	case getUnimplemented:
		return k.UnimplementedPodResourcesListerServer.Get(ctx, req)
	case getDisabled:
		return nil, errors.New("PodResources API Get method disabled") // kubelet's words, code Unknown
	case getBlocks:
		<-ctx.Done()
		return nil, ctx.Err()
	}
	for _, p := range k.pods {
		if p.Namespace == req.PodNamespace && p.Name == req.PodName {
			return &podresourcesv1.GetPodResourcesResponse{PodResources: p}, nil
		}
	}
	return nil, errors.New("pod " + req.PodName + " in namespace " + req.PodNamespace + " not found")
}

func (k *fakeKubelet) List(ctx context.Context, _ *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	k.lists.Add(1)
	if k.listWait {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &podresourcesv1.ListPodResourcesResponse{PodResources: k.pods}, nil
}

// startKubelet serves k on socket and stops it at the end of the test.
func startKubelet(t *testing.T, socket string, k *fakeKubelet) *fakeKubelet {
	t.Helper()
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatalf("listen %s: %v", socket, err)
	}
	k.srv = grpc.NewServer()
	k.socket = socket
	k.stopped = make(chan struct{})
	podresourcesv1.RegisterPodResourcesListerServer(k.srv, k)
	go func() {
		defer close(k.stopped)
		_ = k.srv.Serve(l)
	}()
	t.Cleanup(k.stop)
	return k
}

// stop stops the server like a kubelet that exits: connections close and the
// socket file is removed.
func (k *fakeKubelet) stop() {
	k.srv.Stop()
	<-k.stopped
	_ = os.Remove(k.socket)
}

func socketPath(t *testing.T) string {
	return filepath.Join(t.TempDir(), "kubelet.sock")
}

func newClient(t *testing.T, socket string, opts Options) *Client {
	t.Helper()
	c, err := New(socket, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func devs(res string, ids ...string) *podresourcesv1.ContainerDevices {
	return &podresourcesv1.ContainerDevices{ResourceName: res, DeviceIds: ids}
}

// webPod has devices in two containers, one of them a restartable init
// container, with a device repeated (NUMA split and init → app hand-over).
func webPod() *podresourcesv1.PodResources {
	return &podresourcesv1.PodResources{
		Namespace: "default", Name: "web",
		Containers: []*podresourcesv1.ContainerResources{
			{Name: "sidecar", Devices: []*podresourcesv1.ContainerDevices{devs("example.com/netdev", "eth10")}},
			{Name: "app", Devices: []*podresourcesv1.ContainerDevices{
				devs("example.com/netdev", "eth2"),
				devs("example.com/netdev", "eth10"),
				devs("example.com/pci", "0000:3b:02.1", "0000:3b:02.0"),
				devs("", "orphan"),
				devs("example.com/empty"),
			}},
		},
	}
}

var webWant = map[string][]string{
	"example.com/netdev": {"eth2", "eth10"},
	"example.com/pci":    {"0000:3b:02.0", "0000:3b:02.1"},
}

func otherPod() *podresourcesv1.PodResources {
	return &podresourcesv1.PodResources{Namespace: "other", Name: "web",
		Containers: []*podresourcesv1.ContainerResources{{Name: "c", Devices: []*podresourcesv1.ContainerDevices{devs("example.com/netdev", "eth7")}}}}
}

func TestDeviceIDsGet(t *testing.T) {
	sock := socketPath(t)
	k := startKubelet(t, sock, &fakeKubelet{pods: []*podresourcesv1.PodResources{otherPod(), webPod()}})
	c := newClient(t, sock, Options{})
	got, err := c.DeviceIDs(context.Background(), "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, webWant) {
		t.Fatalf("DeviceIDs = %v, want %v", got, webWant)
	}
	if k.gets.Load() != 1 || k.lists.Load() != 0 {
		t.Fatalf("gets=%d lists=%d, want 1 Get and no List", k.gets.Load(), k.lists.Load())
	}
}

func TestDeviceIDsListFallback(t *testing.T) {
	for name, mode := range map[string]getMode{"unimplemented": getUnimplemented, "feature gate off": getDisabled} {
		t.Run(name, func(t *testing.T) {
			sock := socketPath(t)
			k := startKubelet(t, sock, &fakeKubelet{get: mode, pods: []*podresourcesv1.PodResources{otherPod(), webPod()}})
			c := newClient(t, sock, Options{})
			for i := range 2 {
				got, err := c.DeviceIDs(context.Background(), "default", "web")
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				if !reflect.DeepEqual(got, webWant) {
					t.Fatalf("call %d: DeviceIDs = %v, want %v", i, got, webWant)
				}
			}
			// The second call knows Get is not served and goes straight to List.
			if k.gets.Load() != 1 || k.lists.Load() != 2 {
				t.Fatalf("gets=%d lists=%d, want 1 and 2", k.gets.Load(), k.lists.Load())
			}
		})
	}
}

func TestDeviceIDsPodWithoutDevices(t *testing.T) {
	sock := socketPath(t)
	startKubelet(t, sock, &fakeKubelet{pods: []*podresourcesv1.PodResources{{Namespace: "a", Name: "b",
		Containers: []*podresourcesv1.ContainerResources{{Name: "c"}}}}})
	got, err := newClient(t, sock, Options{}).DeviceIDs(context.Background(), "a", "b")
	if err != nil || got == nil || len(got) != 0 {
		t.Fatalf("DeviceIDs = %v, %v; want an empty map", got, err)
	}
}

func TestDeviceIDsPodNotFound(t *testing.T) {
	for name, mode := range map[string]getMode{"get": getServed, "list": getUnimplemented} {
		t.Run(name, func(t *testing.T) {
			sock := socketPath(t)
			startKubelet(t, sock, &fakeKubelet{get: mode, pods: []*podresourcesv1.PodResources{otherPod()}})
			_, err := newClient(t, sock, Options{}).DeviceIDs(context.Background(), "default", "web")
			if !errors.Is(err, ErrPodNotFound) {
				t.Fatalf("err = %v, want ErrPodNotFound", err)
			}
			for _, s := range []string{sock, "default/web"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not name %q", err, s)
				}
			}
		})
	}
}

// connected returns a client that has talked to a running fake kubelet.
func connected(t *testing.T) (string, *fakeKubelet, *Client) {
	t.Helper()
	sock := socketPath(t)
	k := startKubelet(t, sock, &fakeKubelet{pods: []*podresourcesv1.PodResources{webPod()}})
	c := newClient(t, sock, Options{Timeout: 5 * time.Second})
	if _, err := c.DeviceIDs(context.Background(), "default", "web"); err != nil {
		t.Fatal(err)
	}
	return sock, k, c
}

// TestDeviceIDsKubeletRestart removes the socket and serves a new one at the
// same path, as a kubelet restart does.
func TestDeviceIDsKubeletRestart(t *testing.T) {
	sock, k1, c := connected(t)

	// Restart without a call in between: the next call reaches the new kubelet.
	k1.stop()
	startKubelet(t, sock, &fakeKubelet{get: getDisabled, pods: []*podresourcesv1.PodResources{otherPod()}})
	got, err := c.DeviceIDs(context.Background(), "other", "web")
	if err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if want := map[string][]string{"example.com/netdev": {"eth7"}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after restart: %v, want %v", got, want)
	}
}

func TestDeviceIDsKubeletDownThenUp(t *testing.T) {
	sock, k1, c := connected(t)
	k1.stop()

	// While kubelet is down a call fails fast and names the socket.
	start := time.Now()
	_, err := c.DeviceIDs(context.Background(), "default", "web")
	if err == nil || !strings.Contains(err.Error(), sock) || status.Code(err) != codes.Unavailable {
		t.Fatalf("kubelet down: err = %v, want Unavailable naming %s", err, sock)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("kubelet down: took %v, want a fast failure", d)
	}

	// Several failed calls must not leave a long reconnect backoff behind.
	for range 3 {
		_, _ = c.DeviceIDs(context.Background(), "default", "web")
	}
	startKubelet(t, sock, &fakeKubelet{pods: []*podresourcesv1.PodResources{webPod()}})
	got, err := c.DeviceIDs(context.Background(), "default", "web")
	if err != nil {
		t.Fatalf("kubelet back: %v", err)
	}
	if !reflect.DeepEqual(got, webWant) {
		t.Fatalf("kubelet back: %v", got)
	}
}

func TestDeviceIDsNoSocket(t *testing.T) {
	sock := socketPath(t)
	c := newClient(t, sock, Options{Timeout: 5 * time.Second})
	start := time.Now()
	_, err := c.DeviceIDs(context.Background(), "default", "web")
	if err == nil || !strings.Contains(err.Error(), sock) || !strings.Contains(err.Error(), "default/web") {
		t.Fatalf("err = %v, want an error naming %s and the pod", err, sock)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("took %v, want a fast failure", d)
	}
}

func TestDeviceIDsDeadline(t *testing.T) {
	sock := socketPath(t)
	startKubelet(t, sock, &fakeKubelet{get: getBlocks, listWait: true, pods: []*podresourcesv1.PodResources{webPod()}})

	t.Run("option", func(t *testing.T) {
		c := newClient(t, sock, Options{Timeout: 300 * time.Millisecond})
		start := time.Now()
		_, err := c.DeviceIDs(context.Background(), "default", "web")
		checkDeadline(t, err, time.Since(start), sock)
	})
	t.Run("caller", func(t *testing.T) {
		c := newClient(t, sock, Options{Timeout: time.Minute})
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := c.DeviceIDs(ctx, "default", "web")
		checkDeadline(t, err, time.Since(start), sock)
	})
}

func checkDeadline(t *testing.T, err error, took time.Duration, sock string) {
	t.Helper()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want one wrapping context.DeadlineExceeded", err)
	}
	if !strings.Contains(err.Error(), sock) {
		t.Errorf("error %q does not name the socket", err)
	}
	if took < 250*time.Millisecond || took > 2*time.Second {
		t.Fatalf("took %v, want about 300ms", took)
	}
}

func TestClose(t *testing.T) {
	sock := socketPath(t)
	startKubelet(t, sock, &fakeKubelet{pods: []*podresourcesv1.PodResources{webPod()}})
	c := newClient(t, sock, Options{})
	if _, err := c.DeviceIDs(context.Background(), "default", "web"); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := c.DeviceIDs(context.Background(), "default", "web"); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
}

func TestNewAndArgs(t *testing.T) {
	c, err := New("", Options{})
	if err != nil || c.Socket() != DefaultSocket {
		t.Fatalf("New(\"\") = %v, %v; want the default socket", c, err)
	}
	if _, err := New("x.sock", Options{Timeout: -1}); err == nil {
		t.Fatal("negative timeout accepted")
	}
	if _, err := c.DeviceIDs(context.Background(), "", "web"); err == nil {
		t.Fatal("empty namespace accepted")
	}
}

func TestNaturalCompare(t *testing.T) {
	ordered := []string{"", "0", "00", "1", "2", "10", "eth", "eth0", "eth1", "eth2", "eth10", "eth10a", "eth10b", "eth010b", "ethb"}
	for i, a := range ordered {
		for j, b := range ordered {
			got := naturalCompare(a, b)
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got != want {
				t.Errorf("naturalCompare(%q, %q) = %d, want %d", a, b, got, want)
			}
		}
	}
}
