// Package deviceplugin serves device pools to kubelet over the Device Plugin
// API v1beta1 (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1): one gRPC
// server and one unix socket per pool (= per resource), registration with
// kubelet after the socket serves, ListAndWatch with health updates,
// Allocate, GetPreferredAllocation (NUMA, then parent), device-info files
// (device-info spec §4.1) and re-registration when kubelet restarts.
package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/multinet/multinet/internal/devices/deviceplugin/config"
	"github.com/multinet/multinet/internal/devices/deviceplugin/pool"
	"github.com/multinet/multinet/pkg/spec/devinfo"
)

// KubeletSocketName is the base name of kubelet's Registration socket in the
// device-plugins directory.
const KubeletSocketName = "kubelet.sock"

// Options configure a Plugin.
type Options struct {
	// DevicePluginsDir is kubelet's device-plugins directory holding
	// kubelet.sock and the plugin sockets; pluginapi.DevicePluginPath
	// (/var/lib/kubelet/device-plugins/) when empty.
	DevicePluginsDir string
	// DevInfo is where device-info files are written; the zero Store writes
	// under devinfo.DefaultRoot.
	DevInfo devinfo.Store
	// RPCTimeout bounds Register and the serving self-check; 10 s when zero.
	RPCTimeout time.Duration
	// Metrics, when set, count the plugin's devices, Allocate calls and
	// ListAndWatch updates (NewMetrics); nil counts into unregistered ones.
	Metrics *Metrics
}

// Plugin serves one pool as one resource. Create it with New and start it
// with Run.
type Plugin struct {
	pluginapi.UnimplementedDevicePluginServer

	pool   pool.Pool
	dir    string
	socket string // full path of our socket
	env    string // environment variable set by Allocate
	rpcTO  time.Duration

	mu      sync.Mutex
	devices []pool.Device
	byID    map[string]pool.Device
	update  chan struct{} // closed and replaced when devices change

	files pool.InfoFiles // device-info files; refresh goroutine only
	m     *Metrics
}

// New returns a Plugin for p. The socket is
// "<DevicePluginsDir>/multinet-<resourceName with / → _>.sock".
func New(p pool.Pool, opts Options) (*Plugin, error) {
	rn := p.ResourceName()
	if err := config.ValidateResourceName(rn); err != nil {
		return nil, err
	}
	dir := opts.DevicePluginsDir
	if dir == "" {
		dir = pluginapi.DevicePluginPath
	}
	to := opts.RPCTimeout
	if to <= 0 {
		to = 10 * time.Second
	}
	m := opts.Metrics
	if m == nil {
		m, _ = NewMetrics(nil)
	}
	m.init(rn)
	return &Plugin{
		m:      m,
		pool:   p,
		dir:    dir,
		socket: filepath.Join(dir, "multinet-"+strings.ReplaceAll(rn, "/", "_")+".sock"),
		env:    config.EnvName(rn),
		rpcTO:  to,
		update: make(chan struct{}),
		files:  pool.InfoFiles{Store: opts.DevInfo, Resource: rn},
	}, nil
}

// SocketPath is the full path of the plugin's unix socket.
func (p *Plugin) SocketPath() string { return p.socket }

// ResourceName is the resource the plugin advertises.
func (p *Plugin) ResourceName() string { return p.pool.ResourceName() }

// Run writes the device-info files, serves the socket, registers with
// kubelet, and keeps doing so until ctx is done: when kubelet removes the
// socket (kubelet restart) it serves a new one and registers again, and it
// registers again when kubelet.sock is re-created. On return the socket and
// the device-info files it wrote are removed (device-info spec §4.1.1). It
// returns an error only when it cannot start at all.
func (p *Plugin) Run(ctx context.Context) error {
	log := klog.FromContext(ctx).WithValues("resource", p.ResourceName())
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return fmt.Errorf("resource %s: device-plugins directory: %w", p.ResourceName(), err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("resource %s: %w", p.ResourceName(), err)
	}
	defer w.Close()
	if err := w.Add(p.dir); err != nil {
		return fmt.Errorf("resource %s: watch %s: %w", p.ResourceName(), p.dir, err)
	}

	p.refresh(ctx)
	defer p.files.RemoveAll(ctx)

	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // runs after cancel (defers run last-in first-out)
	defer cancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := p.pool.Watch(ctx, func() { p.refresh(ctx) }); err != nil {
			log.Error(err, "Health watch stopped; devices keep their last health")
		}
	}()

	backoff := 100 * time.Millisecond
	for {
		srv, served, err := p.serve(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			log.Error(err, "Cannot serve the device plugin socket, retrying", "socket", p.socket, "backoff", backoff)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		restart := p.registerAndWatch(ctx, log, w, served)
		srv.Stop()
		if !restart {
			return nil
		}
	}
}

// serve listens on the socket, serves the DevicePlugin service and returns
// once a gRPC call over the socket has succeeded (so kubelet, dialling back
// after Register, finds it serving). served receives Serve's error.
func (p *Plugin) serve(ctx context.Context) (*grpc.Server, <-chan error, error) {
	if err := os.Remove(p.socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("remove stale socket: %w", err)
	}
	lis, err := net.Listen("unix", p.socket)
	if err != nil {
		return nil, nil, fmt.Errorf("listen: %w", err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()

	cctx, cancel := context.WithTimeout(ctx, p.rpcTO)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+p.socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err == nil {
		_, err = pluginapi.NewDevicePluginClient(conn).GetDevicePluginOptions(cctx, &pluginapi.Empty{}, grpc.WaitForReady(true))
		_ = conn.Close()
	}
	if err != nil {
		srv.Stop()
		return nil, nil, fmt.Errorf("self-check of %s: %w", p.socket, err)
	}
	return srv, served, nil
}

// registerAndWatch registers with kubelet (retrying with backoff, and at
// once when kubelet.sock appears) and watches the directory. It returns true
// when the server must be re-created (our socket was removed or Serve
// failed), false when ctx is done.
func (p *Plugin) registerAndWatch(ctx context.Context, log klog.Logger, w *fsnotify.Watcher, served <-chan error) bool {
	r := &kubeletRegistration{p: p, ctx: ctx, log: log, kubeletSock: filepath.Join(p.dir, KubeletSocketName),
		ourID: identity(p.socket), backoff: time.Second, retry: time.NewTimer(0)}
	defer r.retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case err := <-served:
			log.Error(err, "gRPC server stopped, serving again")
			return true
		case <-r.retry.C:
			if r.registered == (fileID{}) && r.attempt() {
				return true
			}
		case ev, ok := <-w.Events:
			if !ok {
				return false
			}
			if r.onEvent(ev) {
				return true
			}
		case err, ok := <-w.Errors:
			if !ok {
				return false
			}
			if r.onWatchError(err) {
				return true
			}
		}
	}
}

// kubeletRegistration is registerAndWatch's state: our socket's identity, the
// kubelet.sock registered with (zero: not registered), the retry timer and
// its backoff. Its methods return true when the server must be re-created.
type kubeletRegistration struct {
	p           *Plugin
	ctx         context.Context
	log         klog.Logger
	kubeletSock string
	ourID       fileID
	registered  fileID
	backoff     time.Duration
	retry       *time.Timer
}

// socketGone reports whether our socket was removed or replaced.
func (r *kubeletRegistration) socketGone() bool { return identity(r.p.socket) != r.ourID }

// attempt registers unless our socket is gone (then it reports that the
// server must be re-created first: kubelet must find us serving); a
// failure is retried after the backoff.
func (r *kubeletRegistration) attempt() (restart bool) {
	if r.socketGone() {
		r.log.Info("Device plugin socket removed (kubelet restart?), serving again before registering", "socket", r.p.socket)
		return true
	}
	id, err := r.p.register(r.ctx, r.kubeletSock)
	if err != nil {
		if r.ctx.Err() != nil {
			return false
		}
		r.log.Info("Registration with kubelet failed, will retry", "err", err.Error(), "backoff", r.backoff)
		r.retry.Reset(r.backoff)
		r.backoff = min(2*r.backoff, 30*time.Second)
		return false
	}
	r.registered, r.backoff = id, time.Second
	r.retry.Stop()
	r.log.Info("Registered with kubelet", "socket", r.p.socket)
	return false
}

// onEvent handles an event of the device-plugins directory: our socket
// removed, or kubelet.sock re-created (register again at once).
func (r *kubeletRegistration) onEvent(ev fsnotify.Event) (restart bool) {
	switch ev.Name {
	case r.p.socket:
		if (ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename)) && r.socketGone() {
			r.log.Info("Device plugin socket removed (kubelet restart?), serving again and re-registering", "socket", r.p.socket)
			return true
		}
	case r.kubeletSock:
		// Events may be stale: what counts is the kubelet.sock there now.
		if ev.Has(fsnotify.Create) {
			if id := identity(r.kubeletSock); id != (fileID{}) && id != r.registered {
				r.log.Info("kubelet.sock re-created, re-registering")
				r.registered = fileID{}
				r.backoff = time.Second
				return r.attempt()
			}
		}
	}
	return false
}

// onWatchError handles a watch error: events may be lost (queue
// overflow), so it looks at the state directly.
func (r *kubeletRegistration) onWatchError(err error) (restart bool) {
	r.log.Error(err, "Watching the device-plugins directory")
	if r.socketGone() {
		return true
	}
	if id := identity(r.kubeletSock); id != (fileID{}) && id != r.registered {
		r.registered = fileID{}
		return r.attempt()
	}
	return false
}

// register calls kubelet's Registration.Register over kubeletSock and
// returns the identity of the kubelet.sock it registered with.
func (p *Plugin) register(ctx context.Context, kubeletSock string) (fileID, error) {
	id := identity(kubeletSock)
	if id == (fileID{}) {
		return fileID{}, fmt.Errorf("%s does not exist yet", kubeletSock)
	}
	cctx, cancel := context.WithTimeout(ctx, p.rpcTO)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+kubeletSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fileID{}, fmt.Errorf("connect to kubelet: %w", err)
	}
	defer conn.Close()
	_, err = pluginapi.NewRegistrationClient(conn).Register(cctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     filepath.Base(p.socket),
		ResourceName: p.ResourceName(),
		Options:      options(),
	})
	if err != nil {
		return fileID{}, fmt.Errorf("register %s with kubelet: %w", p.ResourceName(), err)
	}
	return id, nil
}

// fileID tells one incarnation of a path from the next: inode numbers are
// reused once a file is deleted, the pair with the change time (ns) is not.
type fileID struct {
	ino   uint64
	ctime int64
}

// identity of path; the zero fileID when it does not exist.
func identity(path string) fileID {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return fileID{}
	}
	return fileID{ino: st.Ino, ctime: st.Ctim.Nano()}
}

func options() *pluginapi.DevicePluginOptions {
	return &pluginapi.DevicePluginOptions{PreStartRequired: false, GetPreferredAllocationAvailable: true}
}

// refresh takes the pool's current devices, writes device-info files for
// new or changed ones, removes files of devices that no longer have one,
// and, when the list changed, wakes every ListAndWatch stream. Called from
// Run and the pool's Watch goroutine, never concurrently.
func (p *Plugin) refresh(ctx context.Context) {
	devs := p.pool.Devices()
	p.files.Sync(ctx, devs)
	p.m.setDevices(p.ResourceName(), devs)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byID != nil && equalDevices(p.devices, devs) {
		return
	}
	p.devices = devs
	p.byID = make(map[string]pool.Device, len(devs))
	for _, d := range devs {
		p.byID[d.ID] = d
	}
	close(p.update)
	p.update = make(chan struct{})
}

func equalDevices(a, b []pool.Device) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}

func (p *Plugin) snapshot() ([]pool.Device, map[string]pool.Device, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.devices, p.byID, p.update
}

// GetDevicePluginOptions: GetPreferredAllocation is available,
// PreStartContainer is not required.
func (p *Plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return options(), nil
}

// ListAndWatch sends the device list, then a new list after every change
// of health or membership, until the stream or the server ends.
func (p *Plugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	for {
		devs, _, changed := p.snapshot()
		if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: toAPI(devs)}); err != nil {
			return err
		}
		p.m.updates.WithLabelValues(p.ResourceName()).Inc()
		select {
		case <-changed:
		case <-s.Context().Done():
			return nil
		}
	}
}

func toAPI(devs []pool.Device) []*pluginapi.Device {
	out := make([]*pluginapi.Device, 0, len(devs))
	for _, d := range devs {
		ad := &pluginapi.Device{ID: d.ID, Health: pluginapi.Unhealthy}
		if d.Healthy {
			ad.Health = pluginapi.Healthy
		}
		if d.NUMANode != pool.NoNUMA {
			ad.Topology = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: int64(d.NUMANode)}}}
		}
		out = append(out, ad)
	}
	return out
}

// Allocate returns, per container, the environment variable
// MULTINET_<RESOURCE>=<id>,<id> (see config.EnvName) and the mounts and
// device nodes of the requested devices. A device ID that is not in the
// pool, repeated, or an empty request is InvalidArgument. Each call is
// counted (multinet_deviceplugin_allocations_total, _allocate_duration_seconds).
func (p *Plugin) Allocate(ctx context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	start := time.Now()
	resp, err := p.allocate(ctx, req)
	p.m.allocated(p.ResourceName(), start, err)
	return resp, err
}

// allocate is Allocate's work.
func (p *Plugin) allocate(ctx context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	_, byID, _ := p.snapshot()
	rn := p.ResourceName()
	resp := &pluginapi.AllocateResponse{}
	for i, creq := range req.GetContainerRequests() {
		ids := creq.GetDevicesIds()
		if len(ids) == 0 {
			return nil, status.Errorf(codes.InvalidArgument, "container_requests[%d]: no device IDs for resource %s", i, rn)
		}
		cresp := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{p.env: strings.Join(ids, ",")}}
		seen := map[string]bool{}
		mounts := map[string]bool{}
		nodes := map[string]bool{}
		for _, id := range ids {
			d, ok := byID[id]
			if !ok {
				return nil, status.Errorf(codes.InvalidArgument, "container_requests[%d]: device %q is not a device of resource %s", i, id, rn)
			}
			if seen[id] {
				return nil, status.Errorf(codes.InvalidArgument, "container_requests[%d]: device %q requested twice", i, id)
			}
			seen[id] = true
			if !d.Healthy {
				klog.FromContext(ctx).Info("Allocating an unhealthy device", "resource", rn, "device", id)
			}
			for _, m := range d.Mounts {
				if !mounts[m.ContainerPath] {
					mounts[m.ContainerPath] = true
					cresp.Mounts = append(cresp.Mounts, &pluginapi.Mount{HostPath: m.HostPath, ContainerPath: m.ContainerPath, ReadOnly: m.ReadOnly})
				}
			}
			for _, n := range d.DeviceNodes {
				if !nodes[n.ContainerPath] {
					nodes[n.ContainerPath] = true
					cresp.Devices = append(cresp.Devices, &pluginapi.DeviceSpec{HostPath: n.HostPath, ContainerPath: n.ContainerPath, Permissions: n.Permissions})
				}
			}
		}
		resp.ContainerResponses = append(resp.ContainerResponses, cresp)
	}
	klog.FromContext(ctx).V(2).Info("Allocate", "resource", rn, "request", req.String())
	return resp, nil
}

// GetPreferredAllocation prefers devices on one NUMA node, then on one
// parent (PF), always including must_include_deviceIDs (see preferred).
func (p *Plugin) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	_, byID, _ := p.snapshot()
	resp := &pluginapi.PreferredAllocationResponse{}
	for i, creq := range req.GetContainerRequests() {
		if creq.GetAllocationSize() < 0 {
			return nil, status.Errorf(codes.InvalidArgument, "container_requests[%d]: negative allocation_size %d", i, creq.GetAllocationSize())
		}
		ids := preferred(byID, creq.GetAvailableDeviceIDs(), creq.GetMustIncludeDeviceIDs(), int(creq.GetAllocationSize()))
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp, nil
}

// PreStartContainer is not required (see GetDevicePluginOptions); it does nothing.
func (p *Plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}
