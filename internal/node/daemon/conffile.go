package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/fsnotify/fsnotify"
	"k8s.io/klog/v2"

	"github.com/multinet/multinet/internal/process/atomicfile"
	"github.com/multinet/multinet/pkg/spec/netconf"
)

// confFile is multinet's CNI configuration in the runtime's conf dir.
//
// Readiness (spec §6.1): it is written only once the default network's config
// is available, rewritten when that config changes (its cniVersion and
// capabilities are mirrored, so the runtime passes the runtimeConfig the
// default network can use), and left in place when the daemon stops: deleting
// it would make new pods start with the runtime's next config, silently
// without multinet.
type confFile struct {
	path        string
	socketPath  string
	shimTimeout time.Duration
	// defaultNetwork returns the default network's config list.
	defaultNetwork func() (*libcni.NetworkConfigList, string, error)
	// ready reports whether the informers have synced.
	ready func() error
	// watchDirs are watched with fsnotify for changes of the default
	// network's config (and of multinet's own file).
	watchDirs []string
	// trigger asks for a re-check (NAD events).
	trigger chan struct{}
}

// render returns multinet's conflist for the default network's list.
func (f *confFile) render(def *libcni.NetworkConfigList) ([]byte, error) {
	caps := map[string]bool{}
	for _, p := range def.Plugins {
		for k, v := range p.Network.Capabilities {
			if v {
				caps[k] = true
			}
		}
	}
	plugin := map[string]any{
		"type":       netconf.ShimType,
		"socketPath": f.socketPath,
		"timeout":    f.shimTimeout.String(),
	}
	if len(caps) > 0 {
		keys := make([]string, 0, len(caps))
		for k := range caps {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		c := make(map[string]bool, len(keys))
		for _, k := range keys {
			c[k] = true
		}
		plugin["capabilities"] = c
	}
	out, err := json.MarshalIndent(map[string]any{
		"cniVersion": def.CNIVersion,
		"name":       "multinet",
		"plugins":    []any{plugin},
	}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", f.path, err)
	}
	return append(out, '\n'), nil
}

// remove deletes the file if it is multinet's (its plugin type is the
// shim's), so that the runtime falls back to the next config in the conf
// dir; a file someone else put at that path is left alone. A missing file
// is not an error. Call it only after run has returned (run would write the
// file again).
func (f *confFile) remove() error {
	raw, err := os.ReadFile(f.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", f.path, err)
	}
	var list struct {
		Plugins []struct {
			Type string `json:"type"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(raw, &list); err != nil || len(list.Plugins) != 1 || list.Plugins[0].Type != netconf.ShimType {
		return fmt.Errorf("%s is not multinet's CNI config (want one plugin of type %q); left in place", f.path, netconf.ShimType)
	}
	if err := os.Remove(f.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", f.path, err)
	}
	return nil
}

// sync writes the file when the default network is available and the
// content differs from what is on disk. It reports whether the file is in
// place and up to date.
func (f *confFile) sync() (bool, error) {
	if err := f.ready(); err != nil {
		return false, nil
	}
	def, _, err := f.defaultNetwork()
	if err != nil {
		return false, nil
	}
	want, err := f.render(def)
	if err != nil {
		return false, err
	}
	if have, err := os.ReadFile(f.path); err == nil && bytes.Equal(have, want) {
		return true, nil
	}
	if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
		return false, fmt.Errorf("create CNI conf dir: %w", err)
	}
	if err := atomicfile.WriteFile(f.path, want, 0o644); err != nil {
		return false, err
	}
	return true, nil
}

// run keeps the file in sync until ctx ends: on fsnotify events in the
// watched directories, on trigger, and every resync as a safety net.
// written is called (once) after the first successful write.
func (f *confFile) run(ctx context.Context, resync time.Duration, written func()) {
	log := klog.FromContext(ctx).WithValues("file", f.path)
	w, err := fsnotify.NewWatcher()
	if err != nil {
		log.Error(err, "fsnotify unavailable; polling only")
	} else {
		defer w.Close()
		for _, d := range f.watchDirs {
			if err := os.MkdirAll(d, 0o755); err == nil {
				if err := w.Add(d); err != nil {
					log.Error(err, "watch directory", "dir", d)
				}
			}
		}
	}
	var events <-chan fsnotify.Event
	var errs <-chan error
	if w != nil {
		events, errs = w.Events, w.Errors
	}
	tick := time.NewTicker(resync)
	defer tick.Stop()
	announced := false
	check := func(reason string) {
		ok, err := f.sync()
		switch {
		case err != nil:
			log.Error(err, "CNI config not written")
		case ok && !announced:
			announced = true
			log.Info("CNI config written: multinet is the node's CNI", "reason", reason)
			if written != nil {
				written()
			}
		case !ok && !announced && reason == "start":
			log.Info("waiting for the default network's config and the informers before writing the CNI config")
		}
	}
	check("start")
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-events:
			if strings.HasPrefix(filepath.Base(ev.Name), atomicfile.DefaultTempPrefix(f.path)) || ev.Op == fsnotify.Chmod {
				continue
			}
			check("fsnotify " + ev.Name)
		case err := <-errs:
			log.Error(err, "fsnotify")
		case <-f.trigger:
			check("trigger")
		case <-tick.C:
			check("resync")
		}
	}
}
