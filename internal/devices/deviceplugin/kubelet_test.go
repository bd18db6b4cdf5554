package deviceplugin

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/multinet/multinet/internal/devices/deviceplugin/pool"
	"github.com/multinet/multinet/pkg/spec/devinfo"
)

// fakeKubelet is a real gRPC Registration server on <dir>/kubelet.sock. Like
// kubelet, it dials the plugin's endpoint when Register arrives; it records
// whether the plugin was already serving then.
type fakeKubelet struct {
	pluginapi.UnimplementedRegistrationServer
	dir  string
	srv  *grpc.Server
	regs chan registration
}

type registration struct {
	req     *pluginapi.RegisterRequest
	serving bool // the endpoint answered GetDevicePluginOptions during Register
}

func startKubelet(t *testing.T, dir string) *fakeKubelet {
	t.Helper()
	lis, err := net.Listen("unix", filepath.Join(dir, KubeletSocketName))
	if err != nil {
		t.Fatal(err)
	}
	k := &fakeKubelet{dir: dir, srv: grpc.NewServer(), regs: make(chan registration, 10)}
	pluginapi.RegisterRegistrationServer(k.srv, k)
	go func() { _ = k.srv.Serve(lis) }()
	t.Cleanup(k.srv.Stop)
	return k
}

// stop stops the server; the listener's close unlinks kubelet.sock.
func (k *fakeKubelet) stop() { k.srv.Stop() }

func (k *fakeKubelet) Register(ctx context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	serving := false
	conn, err := grpc.NewClient("unix://"+filepath.Join(k.dir, req.Endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err == nil {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = pluginapi.NewDevicePluginClient(conn).GetDevicePluginOptions(cctx, &pluginapi.Empty{})
		cancel()
		serving = err == nil
		_ = conn.Close()
	}
	k.regs <- registration{req: req, serving: serving}
	return &pluginapi.Empty{}, nil
}

// next waits (at most 10 s) for the next Register call.
func (k *fakeKubelet) next(t *testing.T) registration {
	t.Helper()
	select {
	case r := <-k.regs:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no Register call arrived")
		return registration{}
	}
}

type runningPlugin struct {
	*Plugin
	cancel context.CancelFunc
	done   chan error
}

// startPlugin runs a Plugin for p with device-plugins dir dir and device-info
// root under a temp dir.
func startPlugin(t *testing.T, p pool.Pool, dir string, store devinfo.Store) *runningPlugin {
	t.Helper()
	pl, err := New(p, Options{DevicePluginsDir: dir, DevInfo: store, RPCTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rp := &runningPlugin{Plugin: pl, cancel: cancel, done: make(chan error, 1)}
	go func() { rp.done <- pl.Run(ctx) }()
	t.Cleanup(func() { rp.stop(t) })
	return rp
}

// stop cancels Run and waits for it; safe to call twice.
func (rp *runningPlugin) stop(t *testing.T) {
	t.Helper()
	rp.cancel()
	select {
	case err, ok := <-rp.done:
		if ok && err != nil {
			t.Errorf("Run = %v", err)
		}
		if ok {
			close(rp.done)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func dialPlugin(t *testing.T, socket string) pluginapi.DevicePluginClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return pluginapi.NewDevicePluginClient(conn)
}

// listAndWatch opens a stream; recv returns the next list as ID → health,
// failing the test after 10 s.
func listAndWatch(t *testing.T, c pluginapi.DevicePluginClient) func() map[string]*pluginapi.Device {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := c.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		resp *pluginapi.ListAndWatchResponse
		err  error
	}
	ch := make(chan result, 100)
	go func() {
		for {
			r, err := s.Recv()
			ch <- result{r, err}
			if err != nil {
				return
			}
		}
	}()
	return func() map[string]*pluginapi.Device {
		t.Helper()
		select {
		case r := <-ch:
			if r.err != nil {
				t.Fatalf("ListAndWatch: %v", r.err)
			}
			m := map[string]*pluginapi.Device{}
			for _, d := range r.resp.Devices {
				m[d.ID] = d
			}
			return m
		case <-time.After(10 * time.Second):
			t.Fatal("no ListAndWatch response")
			return nil
		}
	}
}

func healthOf(m map[string]*pluginapi.Device) map[string]string {
	out := map[string]string{}
	for id, d := range m {
		out[id] = d.Health
	}
	return out
}
