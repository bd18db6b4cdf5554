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

	"github.com/multinet/multinet/internal/devices/deviceplugin"
	"github.com/multinet/multinet/internal/devices/deviceplugin/config"
	"github.com/multinet/multinet/internal/devices/deviceplugin/pool"
	"github.com/multinet/multinet/internal/process/metricsserver"
	"github.com/multinet/multinet/internal/process/version"
	"github.com/multinet/multinet/pkg/spec/devinfo"
)

func main() {
	configPath := flag.String("config", "/etc/multinet/deviceplugin.yaml", "device pool configuration file (JSON or YAML)")
	dpDir := flag.String("device-plugins-dir", pluginapi.DevicePluginPath, "kubelet's device-plugins directory (holds kubelet.sock and the plugin sockets)")
	devinfoDir := flag.String("devinfo-dir", devinfo.DefaultRoot, "device-info root directory; device plugin files go to <dir>/dp")
	sysfsRoot := flag.String("sysfs-root", "/sys", "sysfs mount point used for PCI discovery and NUMA nodes")
	metricsAddr := flag.String("metrics-address", DefaultMetricsAddress, "address of /metrics, /healthz, /readyz (plain HTTP; empty: off)")
	klog.InitFlags(nil)
	version.ParseFlags("multinet-deviceplugin", "Advertises network device pools to kubelet (Device Plugin API v1beta1).")

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *configPath, *dpDir, *devinfoDir, *sysfsRoot, *metricsAddr); err != nil {
		klog.ErrorS(err, "multinet-deviceplugin failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.InfoS("multinet-deviceplugin stopped")
	klog.Flush()
}

// DefaultMetricsAddress is where /metrics is served unless
// --metrics-address says otherwise: the node's loopback (the DaemonSet runs
// on the host network), as multinetd's 127.0.0.1:9390
// (docs/operations.md "Scraping the node components").
const DefaultMetricsAddress = "127.0.0.1:9391"

func run(ctx context.Context, configPath, dpDir, devinfoDir, sysfsRoot, metricsAddr string) error {
	cfg, err := config.Load(configPath)
	if err != nil {
		return err
	}
	reg, err := metricsserver.NewRegistry()
	if err != nil {
		return err
	}
	m, err := deviceplugin.NewMetrics(reg)
	if err != nil {
		return err
	}
	plugins, err := deviceplugin.Plugins(cfg, pool.Env{SysfsRoot: sysfsRoot}, deviceplugin.Options{
		DevicePluginsDir: dpDir,
		DevInfo:          devinfo.Store{Root: devinfoDir},
		Metrics:          m,
	})
	if err != nil {
		return err
	}
	stop, err := metricsserver.Run(ctx, metricsAddr, reg, nil)
	if err != nil {
		return err
	}
	defer stop()
	if err := deviceplugin.RunAll(ctx, plugins); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
