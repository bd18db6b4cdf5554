// Command multinet-dra-driver serves multinet's network device pools through
// Dynamic Resource Allocation: a DRA kubelet plugin that publishes the node's
// ResourceSlices, prepares the claims allocated to its devices (CDI specs,
// device-info files) and reports device health (package dra, docs/dra.md).
// The pool configuration has the device plugin's format
// (docs/deviceplugin.md). It is a command of its own, apart from
// multinet-deviceplugin, so that the device plugin does not carry the DRA
// and client-go code (binary size, RSS).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/multinet/multinet/internal/devices/deviceplugin/config"
	"github.com/multinet/multinet/internal/devices/deviceplugin/pool"
	"github.com/multinet/multinet/internal/devices/dra"
	"github.com/multinet/multinet/internal/process/metricsserver"
	"github.com/multinet/multinet/internal/process/version"
	"github.com/multinet/multinet/pkg/spec/devinfo"
)

// options are the command's flags.
type options struct {
	configPath, devinfoDir, sysfsRoot                    string
	driverName, nodeName, kubeletDir, cdiDir, kubeconfig string
	metricsAddr                                          string
}

// DefaultMetricsAddress is where /metrics is served unless
// --metrics-address says otherwise: the node's loopback (the DaemonSet runs
// on the host network), as multinetd's 127.0.0.1:9390
// (docs/operations.md "Scraping the node components").
const DefaultMetricsAddress = "127.0.0.1:9392"

func main() {
	var o options
	flag.StringVar(&o.configPath, "config", "/etc/multinet/dra-driver.yaml", "device pool configuration file (JSON or YAML; the device plugin's format, docs/deviceplugin.md)")
	flag.StringVar(&o.devinfoDir, "devinfo-dir", devinfo.DefaultRoot, "device-info root directory; the files go to <dir>/dp")
	flag.StringVar(&o.sysfsRoot, "sysfs-root", "/sys", "sysfs mount point used for PCI discovery and NUMA nodes")
	flag.StringVar(&o.driverName, "dra-driver-name", dra.DefaultDriverName, "the DRA driver name DeviceClasses select")
	flag.StringVar(&o.nodeName, "node-name", os.Getenv("NODE_NAME"), "this node's name (default $NODE_NAME)")
	flag.StringVar(&o.kubeletDir, "kubelet-dir", "/var/lib/kubelet", "the kubelet's root directory (plugins_registry/, plugins/<driver>/)")
	flag.StringVar(&o.cdiDir, "cdi-dir", "/var/run/cdi", "where CDI specs for devices with mounts or device nodes are written")
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster configuration when empty")
	flag.StringVar(&o.metricsAddr, "metrics-address", DefaultMetricsAddress, "address of /metrics, /healthz, /readyz (plain HTTP; empty: off)")
	klog.InitFlags(nil)
	version.ParseFlags("multinet-dra-driver", "Serves network device pools through Dynamic Resource Allocation (a DRA kubelet plugin publishing ResourceSlices).")

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		klog.ErrorS(err, "multinet-dra-driver failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.InfoS("multinet-dra-driver stopped")
	klog.Flush()
}

// run loads the pools, connects to the API server and serves the pools
// until ctx ends.
func run(ctx context.Context, o options) error {
	cfg, err := config.Load(o.configPath)
	if err != nil {
		return err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	reg, err := metricsserver.NewRegistry()
	if err != nil {
		return err
	}
	m, err := dra.NewMetrics(reg)
	if err != nil {
		return err
	}
	d, err := dra.New(cfg, pool.Env{SysfsRoot: o.sysfsRoot}, dra.Options{
		DriverName: o.driverName, NodeName: o.nodeName, Client: client,
		DevInfo: devinfo.Store{Root: o.devinfoDir}, KubeletDir: o.kubeletDir, CDIDir: o.cdiDir,
		Metrics: m,
	})
	if err != nil {
		return err
	}
	stop, err := metricsserver.Run(ctx, o.metricsAddr, reg, nil)
	if err != nil {
		return err
	}
	defer stop()
	klog.InfoS("Starting DRA driver", "driver", o.driverName, "node", o.nodeName, "pools", len(cfg.Pools))
	return d.Run(ctx)
}
