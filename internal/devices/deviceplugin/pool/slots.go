package pool

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/fsnotify/fsnotify"
	"k8s.io/klog/v2"

	"github.com/multinet/multinet/internal/devices/deviceplugin/config"
	"github.com/multinet/multinet/pkg/spec/devinfo"
)

// slotPool is a pool of socket slots: directories <dir>/slot<N> on the host,
// each mounted read-write into the container at <containerPath>/slot<N>,
// where the socket lives. A slot is healthy while its directory exists.
type slotPool struct {
	resourceName string
	dir          string

	mu      sync.Mutex
	devices []Device
}

// NewVhostUser creates (when missing, mode 0755) the slot directories of a
// vhost-user pool and returns the pool. Device "slot<N>" mounts
// <Dir>/slot<N> at <ContainerPath>/slot<N> and has a "vhost-user" device-info
// map (device-info spec §3.1.5) with the configured mode and the socket path
// as the container sees it, <ContainerPath>/slot<N>/<SocketName>.
func NewVhostUser(resourceName string, c config.VhostUserSlots) (Pool, error) {
	return newSlots(resourceName, c.Dir, c.Slots, c.ContainerPath, func(containerDir string) *devinfo.DeviceInfo {
		return &devinfo.DeviceInfo{Type: devinfo.TypeVhostUser, Version: devinfo.SpecVersion,
			VhostUser: &devinfo.VhostUser{Mode: c.Mode, Path: filepath.Join(containerDir, c.SocketName)}}
	})
}

// NewMemif is NewVhostUser for memif: a "memif" device-info map (device-info
// spec §3.1.6) with the configured role and mode.
func NewMemif(resourceName string, c config.MemifSlots) (Pool, error) {
	return newSlots(resourceName, c.Dir, c.Slots, c.ContainerPath, func(containerDir string) *devinfo.DeviceInfo {
		return &devinfo.DeviceInfo{Type: devinfo.TypeMemif, Version: devinfo.SpecVersion,
			Memif: &devinfo.Memif{Role: c.Role, Mode: c.Mode, Path: filepath.Join(containerDir, c.SocketName)}}
	})
}

func newSlots(resourceName, dir string, slots int, containerPath string, info func(string) *devinfo.DeviceInfo) (*slotPool, error) {
	p := &slotPool{resourceName: resourceName, dir: dir}
	for i := range slots {
		id := "slot" + strconv.Itoa(i)
		host := filepath.Join(dir, id)
		if err := os.MkdirAll(host, 0o755); err != nil {
			return nil, fmt.Errorf("pool %s: create slot directory: %w", resourceName, err)
		}
		cpath := filepath.Join(containerPath, id)
		p.devices = append(p.devices, Device{
			ID: id, Healthy: true, NUMANode: NoNUMA, Info: info(cpath),
			Mounts: []Mount{{HostPath: host, ContainerPath: cpath}},
		})
	}
	sortDevices(p.devices)
	return p, nil
}

func (p *slotPool) ResourceName() string { return p.resourceName }

func (p *slotPool) Devices() []Device {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.devices
}

// refresh re-reads slot health; it reports whether anything changed.
func (p *slotPool) refresh() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	next := make([]Device, len(p.devices))
	changed := false
	for i, d := range p.devices {
		st, err := os.Stat(d.Mounts[0].HostPath)
		d.Healthy = err == nil && st.IsDir()
		changed = changed || d.Healthy != p.devices[i].Healthy
		next[i] = d
	}
	if changed {
		p.devices = next // copy on write: callers may hold the old slice
	}
	return changed
}

// Watch follows the slot directories with inotify (fsnotify on the pool
// directory): removing a slot directory makes it unhealthy, re-creating it
// healthy again.
func (p *slotPool) Watch(ctx context.Context, changed func()) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("pool %s: %w", p.resourceName, err)
	}
	defer w.Close()
	if err := w.Add(p.dir); err != nil {
		return fmt.Errorf("pool %s: watch %s: %w", p.resourceName, p.dir, err)
	}
	if p.refresh() { // anything that changed before the watch started
		changed()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if ev.Has(fsnotify.Create) || ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
				if p.refresh() {
					changed()
				}
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			klog.ErrorS(err, "Watching slot directories", "resource", p.resourceName, "dir", p.dir)
			if p.refresh() {
				changed()
			}
		}
	}
}
