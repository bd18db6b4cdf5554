package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/klog/v2"

	"github.com/multinet/multinet/internal/devices/deviceplugin/config"
	"github.com/multinet/multinet/internal/devices/deviceplugin/pool"
)

// Plugins builds one Plugin per pool of cfg: it discovers every pool's
// devices (pool.New with env) and rejects a configuration in which two pools
// of the same kind select the same device (kubelet would hand it out twice).
func Plugins(cfg *config.Config, env pool.Env, opts Options) ([]*Plugin, error) {
	owner := map[string]string{} // kind + "\x00" + device ID → resourceName
	plugins := make([]*Plugin, 0, len(cfg.Pools))
	for i, pc := range cfg.Pools {
		p, err := pool.New(pc, env)
		if err != nil {
			return nil, fmt.Errorf("pools[%d] (%s): %w", i, pc.ResourceName, err)
		}
		for _, d := range p.Devices() {
			key := pc.Kind() + "\x00" + d.ID
			if other, dup := owner[key]; dup {
				return nil, fmt.Errorf("pools[%d] (%s): device %s is also selected by %s", i, pc.ResourceName, d.ID, other)
			}
			owner[key] = pc.ResourceName
		}
		pl, err := New(p, opts)
		if err != nil {
			return nil, fmt.Errorf("pools[%d]: %w", i, err)
		}
		plugins = append(plugins, pl)
	}
	return plugins, nil
}

// RunAll runs every plugin until ctx is done. If one plugin cannot start, the
// others are stopped and its error is returned. Every plugin has cleaned up
// (socket, device-info files) when RunAll returns.
func RunAll(ctx context.Context, plugins []*Plugin) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, pl := range plugins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			klog.InfoS("Starting device plugin", "resource", pl.ResourceName(), "socket", pl.SocketPath(), "devices", len(pl.pool.Devices()))
			if err := pl.Run(ctx); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				cancel()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
