package pool

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/multinet/multinet/pkg/spec/devinfo"
)

// InfoFiles keeps the device plugin device-info files of one resource
// (device-info spec §4.1.1: <root>/dp/<resource>-<deviceID>-device.json) in
// line with its devices. The Device Plugin API server and the DRA driver both
// write them, so that multinetd finds a device's device-info the same way
// whichever API allocated it. Not safe for concurrent use.
type InfoFiles struct {
	Store    devinfo.Store
	Resource string

	written map[string]*devinfo.DeviceInfo // files written, by device ID
}

// Sync writes the file of every device of devs that has device-info (before
// the device is advertised) and removes the files it wrote for devices no
// longer in devs or without device-info. Failures are logged and retried on
// the next Sync.
func (f *InfoFiles) Sync(ctx context.Context, devs []Device) {
	log := klog.FromContext(ctx)
	if f.written == nil {
		f.written = map[string]*devinfo.DeviceInfo{}
	}
	keep := map[string]bool{}
	for _, d := range devs {
		if d.Info == nil {
			continue
		}
		keep[d.ID] = true
		if old, ok := f.written[d.ID]; ok && infoEqual(old, d.Info) {
			continue
		}
		path, err := f.Store.WriteDP(f.Resource, d.ID, d.Info)
		if err != nil {
			log.Error(err, "Cannot write device-info file", "resource", f.Resource, "device", d.ID)
			continue
		}
		f.written[d.ID] = d.Info
		log.V(2).Info("Wrote device-info file", "path", path)
	}
	for id := range f.written {
		if !keep[id] {
			if err := f.Store.RemoveDP(f.Resource, id); err != nil {
				log.Error(err, "Cannot remove device-info file", "resource", f.Resource, "device", id)
				continue
			}
			delete(f.written, id)
		}
	}
}

// RemoveAll deletes the files Sync wrote (device-info spec §4.1.1: on stop).
func (f *InfoFiles) RemoveAll(ctx context.Context) { f.Sync(ctx, nil) }
