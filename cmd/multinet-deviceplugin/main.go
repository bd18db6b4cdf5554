// Command multinet-deviceplugin is multinet's reference network device
// plugin: it advertises pools of network devices (host netdevs, PCI
// functions, vhost-user / memif socket slots) to kubelet over the Device
// Plugin API v1beta1 and writes their device-info files (NPWG device-info
// spec §4.1). The configuration file format is described in
// docs/deviceplugin.md. The same pools served through Dynamic Resource
// Allocation are multinet-dra-driver's (docs/dra.md).
package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/multinet/multinet/internal/version"
	"github.com/multinet/multinet/pkg/deviceplugin"
	"github.com/multinet/multinet/pkg/deviceplugin/config"
	"github.com/multinet/multinet/pkg/deviceplugin/pool"
	"github.com/multinet/multinet/pkg/devinfo"
)

func main() {
	configPath := flag.String("config", "/etc/multinet/deviceplugin.yaml", "device pool configuration file (JSON or YAML)")
	dpDir := flag.String("device-plugins-dir", pluginapi.DevicePluginPath, "kubelet's device-plugins directory (holds kubelet.sock and the plugin sockets)")
	devinfoDir := flag.String("devinfo-dir", devinfo.DefaultRoot, "device-info root directory; device plugin files go to <dir>/dp")
	sysfsRoot := flag.String("sysfs-root", "/sys", "sysfs mount point used for PCI discovery and NUMA nodes")
	klog.InitFlags(nil)
	version.ParseFlags("multinet-deviceplugin", "Advertises network device pools to kubelet (Device Plugin API v1beta1).")

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *configPath, *dpDir, *devinfoDir, *sysfsRoot); err != nil {
		klog.ErrorS(err, "multinet-deviceplugin failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.InfoS("multinet-deviceplugin stopped")
	klog.Flush()
}

func run(ctx context.Context, configPath, dpDir, devinfoDir, sysfsRoot string) error {
	cfg, err := config.Load(configPath)
	if err != nil {
		return err
	}
	plugins, err := deviceplugin.Plugins(cfg, pool.Env{SysfsRoot: sysfsRoot}, deviceplugin.Options{
		DevicePluginsDir: dpDir,
		DevInfo:          devinfo.Store{Root: devinfoDir},
	})
	if err != nil {
		return err
	}
	if err := deviceplugin.RunAll(ctx, plugins); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
