package dra

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"

	"github.com/multinet/multinet/internal/devices/deviceplugin/config"
	"github.com/multinet/multinet/internal/devices/deviceplugin/pool"
	"github.com/multinet/multinet/pkg/spec/devinfo"
)

// Options configure a Driver.
type Options struct {
	// DriverName is the DRA driver name (a DNS subdomain); DefaultDriverName
	// when empty. DeviceClasses select the driver's devices by it.
	DriverName string
	// NodeName is the node the driver runs on. Required.
	NodeName string
	// Client reaches the API server (ResourceClaims, ResourceSlices). Required.
	Client kubernetes.Interface
	// DevInfo is where the device-info files are written (device-info spec
	// §4.1), as the device plugin writes them.
	DevInfo devinfo.Store
	// KubeletDir is the kubelet's root directory, /var/lib/kubelet when
	// empty: the registration socket goes to <KubeletDir>/plugins_registry,
	// the DRA socket to <KubeletDir>/plugins/<DriverName>. The kubelet dials
	// the path the driver reports, so a containerised driver mounts them at
	// their host paths.
	KubeletDir string
	// CDIDir is where CDI specs for devices with mounts or device nodes are
	// written, /var/run/cdi when empty; the container runtime must read it.
	CDIDir string
	// HealthResend is how often the health report is sent again without a
	// change (the kubelet forgets a device's health after 30 s); 20 s when 0.
	HealthResend time.Duration
	// Metrics, when set, count publications, prepares and unprepares
	// (NewMetrics); nil counts into unregistered ones.
	Metrics *Metrics
}

// Driver serves pools through DRA. Create it with New and run it with Run.
type Driver struct {
	opts  Options
	pools []*servedPool
	byDRA map[string]*servedPool // by DRA pool name

	helper *kubeletplugin.Helper
	fatal  context.CancelCauseFunc

	mu       sync.Mutex
	names    map[string]map[string]pool.Device // DRA pool → device name → device, as last published
	prepared map[types.UID][]preparedDevice    // claims prepared, by UID
	owner    map[string]holder                 // "<pool>/<device>" → claim that holds it
	changed  chan struct{}                     // closed and replaced after each publish
}

type preparedDevice struct {
	pool, device string
}

// holder is the claim a prepared device belongs to.
type holder struct {
	uid             types.UID
	namespace, name string
}

// New returns a Driver for cfg's pools, discovered with env.
func New(cfg *config.Config, env pool.Env, opts Options) (*Driver, error) {
	if opts.NodeName == "" {
		return nil, errors.New("dra: Options.NodeName is required")
	}
	if opts.Client == nil {
		return nil, errors.New("dra: Options.Client is required")
	}
	if opts.DriverName == "" {
		opts.DriverName = DefaultDriverName
	}
	if opts.KubeletDir == "" {
		opts.KubeletDir = "/var/lib/kubelet"
	}
	if opts.CDIDir == "" {
		opts.CDIDir = kubeletplugin.DefaultCDIDir
	}
	if opts.HealthResend <= 0 {
		opts.HealthResend = 20 * time.Second
	}
	if opts.Metrics == nil {
		opts.Metrics, _ = NewMetrics(nil)
	}
	d := &Driver{opts: opts, byDRA: map[string]*servedPool{}, names: map[string]map[string]pool.Device{},
		prepared: map[types.UID][]preparedDevice{}, owner: map[string]holder{}, changed: make(chan struct{})}
	for i, pc := range cfg.Pools {
		p, err := pool.New(pc, env)
		if err != nil {
			return nil, fmt.Errorf("pools[%d] (%s): %w", i, pc.ResourceName, err)
		}
		sp := &servedPool{pool: p, kind: pc.Kind(), name: PoolName(opts.NodeName, pc.ResourceName),
			files: pool.InfoFiles{Store: opts.DevInfo, Resource: pc.ResourceName}, tainted: map[string]time.Time{}}
		if _, _, err := sp.devices(time.Now()); err != nil {
			return nil, fmt.Errorf("pools[%d]: %w", i, err)
		}
		d.pools = append(d.pools, sp)
		d.byDRA[sp.name] = sp
	}
	return d, nil
}

// Run writes the device-info files, registers with the kubelet, publishes
// the ResourceSlices and keeps them (and the device-info files and the
// health reported to the kubelet) in line with the pools until ctx is done.
// On return the driver is unregistered and its device-info files are
// removed; the slices stay (the kubelet removes a node's slices when it is
// not restarted within a grace period, or the next Run replaces them).
// Errors: the driver cannot start, or a fatal background error.
func (d *Driver) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	d.fatal = cancel
	for _, p := range d.pools {
		p.files.Sync(ctx, p.pool.Devices())
	}
	defer func() {
		for _, p := range d.pools {
			p.files.RemoveAll(ctx)
		}
	}()
	registry := filepath.Join(d.opts.KubeletDir, "plugins_registry")
	data := filepath.Join(d.opts.KubeletDir, "plugins", d.opts.DriverName)
	for _, dir := range []string{registry, data} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return fmt.Errorf("dra driver %s: %w", d.opts.DriverName, err)
		}
	}
	helper, err := kubeletplugin.Start(ctx, d,
		kubeletplugin.KubeClient(d.opts.Client),
		kubeletplugin.NodeName(d.opts.NodeName),
		kubeletplugin.DriverName(d.opts.DriverName),
		kubeletplugin.RegistrarDirectoryPath(registry),
		kubeletplugin.PluginDataDirectoryPath(data),
	)
	if err != nil {
		return fmt.Errorf("dra driver %s: start kubelet plugin: %w", d.opts.DriverName, err)
	}
	d.helper = helper
	defer helper.Stop()
	d.seedFromSlices(ctx)
	if err := d.publish(ctx); err != nil {
		return err
	}
	var wg sync.WaitGroup
	for _, p := range d.pools {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := p.pool.Watch(ctx, func() {
				p.files.Sync(ctx, p.pool.Devices())
				if err := d.publish(ctx); err != nil {
					cancel(err)
				}
			})
			if err != nil {
				cancel(fmt.Errorf("pool %s: %w", p.pool.ResourceName(), err))
			}
		}()
	}
	<-ctx.Done()
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// seedFromSlices reads the node's slices of the driver as an earlier run
// published them: a device published untainted then that is out of the
// host now was moved into a pod while the driver was down, not lost
// (pool.Seeder). Errors are logged: the devices then count as missing
// until they come back.
func (d *Driver) seedFromSlices(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	l, err := d.opts.Client.ResourceV1().ResourceSlices().List(lctx, metav1.ListOptions{
		FieldSelector: "spec.driver=" + d.opts.DriverName + ",spec.nodeName=" + d.opts.NodeName})
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot read the slices of an earlier run")
		return
	}
	ids := map[string][]string{} // DRA pool → device IDs published healthy
	for _, s := range l.Items {
		for _, dev := range s.Spec.Devices {
			if id := dev.Attributes[AttrDeviceID].StringValue; id != nil && len(dev.Taints) == 0 {
				ids[s.Spec.Pool.Name] = append(ids[s.Spec.Pool.Name], *id)
			}
		}
	}
	for _, p := range d.pools {
		if s, ok := p.pool.(pool.Seeder); ok && len(ids[p.name]) > 0 && s.AssumeSeen(ids[p.name]) {
			klog.FromContext(ctx).Info("Devices out of the host, published healthy before: in use", "pool", p.name)
		}
	}
}

// publish hands the current devices of every pool to the ResourceSlice
// controller and wakes the health reporters.
func (d *Driver) publish(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	res := resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{}}
	now := time.Now()
	for _, p := range d.pools {
		devs, byName, err := p.devices(now)
		if err != nil {
			return err
		}
		d.names[p.name] = byName
		res.Pools[p.name] = resourceslice.Pool{Slices: sliceDevices(devs)}
	}
	err := d.helper.PublishResources(ctx, res)
	d.opts.Metrics.published(d.pools, d.names, err)
	if err != nil {
		return fmt.Errorf("dra driver %s: publish ResourceSlices: %w", d.opts.DriverName, err)
	}
	close(d.changed)
	d.changed = make(chan struct{})
	return nil
}

// HandleError implements kubeletplugin.DRAPlugin: background errors are
// logged; a fatal one stops Run.
func (d *Driver) HandleError(ctx context.Context, err error, msg string) {
	utilruntime.HandleErrorWithContext(ctx, err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) && d.fatal != nil {
		d.fatal(fmt.Errorf("%s: %w", msg, err))
	}
}

// WatchHealthStatus implements kubeletplugin.DRAPlugin: a report of every
// device at once, then after each change and every HealthResend.
func (d *Driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	t := time.NewTicker(d.opts.HealthResend)
	defer t.Stop()
	for {
		report, changed := d.healthReport()
		select {
		case <-ctx.Done():
			return nil
		case reports <- report:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-t.C:
		}
	}
}

func (d *Driver) healthReport() (kubeletplugin.DeviceHealthReport, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var r kubeletplugin.DeviceHealthReport
	now := time.Now()
	for _, p := range d.pools {
		for name, dev := range d.names[p.name] {
			h := kubeletplugin.HealthStatusHealthy
			if !dev.Healthy {
				h = kubeletplugin.HealthStatusUnhealthy
			}
			r.Devices = append(r.Devices, kubeletplugin.DeviceHealth{PoolName: p.name, DeviceName: name, Health: h,
				LastUpdated: now, HealthCheckTimeout: 2 * d.opts.HealthResend})
		}
	}
	return r, d.changed
}

// PrepareResourceClaims implements kubeletplugin.DRAPlugin: each device of
// this driver in a claim's allocation must be one this node publishes and
// not held by another claim; devices with mounts or device nodes (socket
// slots, vfio) get a CDI spec.
func (d *Driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	start := time.Now()
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	errs := make([]error, 0, len(claims))
	defer func() { d.opts.Metrics.handled(opPrepare, start, errs, d.preparedClaims()) }()
	for _, c := range claims {
		devs, err := d.prepare(ctx, c)
		errs = append(errs, err)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Cannot prepare ResourceClaim", "claim", klog.KObj(c))
			out[c.UID] = kubeletplugin.PrepareResult{Err: fmt.Errorf("ResourceClaim %s/%s: %w", c.Namespace, c.Name, err)}
			continue
		}
		out[c.UID] = kubeletplugin.PrepareResult{Devices: devs}
	}
	return out, nil
}

func (d *Driver) prepare(ctx context.Context, c *resourceapi.ResourceClaim) ([]kubeletplugin.Device, error) {
	if c.Status.Allocation == nil {
		return nil, errors.New("not allocated")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var (
		out  []kubeletplugin.Device
		held []preparedDevice
		cdi  []cdiDevice
	)
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.Driver != d.opts.DriverName {
			continue
		}
		dev, ok := d.names[r.Pool][r.Device]
		if !ok {
			return nil, fmt.Errorf("device %s/%s is not published by driver %s on node %s", r.Pool, r.Device, d.opts.DriverName, d.opts.NodeName)
		}
		key := r.Pool + "/" + r.Device
		if other, busy := d.owner[key]; busy && other.uid != c.UID {
			if d.stillHolds(ctx, other, r.Pool, r.Device) {
				return nil, fmt.Errorf("device %s (%s) is prepared for another ResourceClaim, %s/%s (uid %s), which still holds it", key, dev.ID, other.namespace, other.name, other.uid)
			}
			if err := d.backInHost(r.Pool, r.Device, dev.ID, other); err != nil {
				return nil, err
			}
		}
		kd := kubeletplugin.Device{Requests: []string{r.Request}, PoolName: r.Pool, DeviceName: r.Device}
		if len(dev.Mounts) > 0 || len(dev.DeviceNodes) > 0 {
			cd := cdiDevice{name: string(c.UID) + "-" + r.Device, dev: dev}
			cdi = append(cdi, cd)
			kd.CDIDeviceIDs = []string{cdiKind + "=" + cd.name}
		}
		out = append(out, kd)
		held = append(held, preparedDevice{pool: r.Pool, device: r.Device})
	}
	if err := writeCDISpec(d.opts.CDIDir, d.opts.DriverName, c.UID, cdi); err != nil {
		return nil, err
	}
	for _, h := range held {
		d.owner[h.pool+"/"+h.device] = holder{uid: c.UID, namespace: c.Namespace, name: c.Name}
	}
	d.prepared[c.UID] = held
	return out, nil
}

// backInHost fails while device (pool device id) of DRA pool poolName, freed by claim h
// (deleted, or no longer allocated it), is still out of the host: the
// scheduler may give the device to a new claim as soon as the old one is
// gone, before the kubelet has torn down the old pod's sandbox, whose CNI
// DEL moves the device back. Refusing the prepare until then keeps the new
// pod from being started on a device that is not there (its first CNI ADD
// would fail); the kubelet retries the prepare. Pools whose devices never
// leave the host (no pool.HostPresence) always pass.
func (d *Driver) backInHost(poolName, device, id string, h holder) error {
	sp, ok := d.byDRA[poolName]
	if !ok {
		return nil
	}
	if hp, ok := sp.pool.(pool.HostPresence); ok && !hp.InHost(id) {
		return fmt.Errorf("device %s/%s (%s) is not back in the host yet: ResourceClaim %s/%s (uid %s) held it, and its pod's network teardown has not returned it (the kubelet retries)",
			poolName, device, id, h.namespace, h.name, h.uid)
	}
	return nil
}

// stillHolds reports whether claim h (prepared earlier, not unprepared
// yet) is still allocated device pool/device: the kubelet may unprepare a
// deleted pod's claim after the scheduler gave its device to a new claim
// (the old claim is gone then), which is no conflict. When the API cannot
// say, the device counts as held.
func (d *Driver) stillHolds(ctx context.Context, h holder, pool, device string) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := d.opts.Client.ResourceV1().ResourceClaims(h.namespace).Get(ctx, h.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false
	case err != nil:
		return true
	case c.UID != h.uid || c.Status.Allocation == nil:
		return false
	}
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.Driver == d.opts.DriverName && r.Pool == pool && r.Device == device {
			return true
		}
	}
	return false
}

// UnprepareResourceClaims implements kubeletplugin.DRAPlugin: the claim's
// devices are free again and its CDI spec is removed. Unknown claims are
// not an error (the call is idempotent).
func (d *Driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	start := time.Now()
	out := make(map[types.UID]error, len(claims))
	errs := make([]error, 0, len(claims))
	d.mu.Lock()
	defer func() { d.opts.Metrics.handled(opUnprepare, start, errs, len(d.prepared)); d.mu.Unlock() }()
	for _, c := range claims {
		for _, h := range d.prepared[c.UID] {
			if d.owner[h.pool+"/"+h.device].uid == c.UID {
				delete(d.owner, h.pool+"/"+h.device)
			}
		}
		delete(d.prepared, c.UID)
		out[c.UID] = removeCDISpec(d.opts.CDIDir, d.opts.DriverName, c.UID)
		errs = append(errs, out[c.UID])
	}
	return out, nil
}

// preparedClaims is the number of claims prepared and not unprepared.
func (d *Driver) preparedClaims() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.prepared)
}
