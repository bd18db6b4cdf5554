// Command multinet-deviceplugin is multinet's reference network device
// plugin: it advertises pools of network devices (host netdevs, PCI
// functions, vhost-user / memif socket slots) to kubelet over the Device
// Plugin API v1beta1 and writes their device-info files (NPWG device-info
// spec §4.1). The configuration file format is described in
// docs/deviceplugin.md. With --api=dra it serves the same pools through
// Dynamic Resource Allocation instead (package dra, docs/dra.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/multinet/multinet/internal/version"
	"github.com/multinet/multinet/pkg/deviceplugin"
	"github.com/multinet/multinet/pkg/deviceplugin/config"
	"github.com/multinet/multinet/pkg/deviceplugin/pool"
	"github.com/multinet/multinet/pkg/devinfo"
	"github.com/multinet/multinet/pkg/dra"
)

func main() {
	configPath := flag.String("config", "/etc/multinet/deviceplugin.yaml", "device pool configuration file (JSON or YAML)")
	dpDir := flag.String("device-plugins-dir", pluginapi.DevicePluginPath, "kubelet's device-plugins directory (holds kubelet.sock and the plugin sockets)")
	devinfoDir := flag.String("devinfo-dir", devinfo.DefaultRoot, "device-info root directory; device plugin files go to <dir>/dp")
	sysfsRoot := flag.String("sysfs-root", "/sys", "sysfs mount point used for PCI discovery and NUMA nodes")
	api := flag.String("api", "device-plugin", "how the pools are served: device-plugin (Device Plugin API v1beta1) or dra (a DRA kubelet plugin publishing ResourceSlices)")
	var dopts draFlags
	flag.StringVar(&dopts.driverName, "dra-driver-name", dra.DefaultDriverName, "--api=dra: the DRA driver name")
	flag.StringVar(&dopts.nodeName, "node-name", os.Getenv("NODE_NAME"), "--api=dra: this node's name (default $NODE_NAME)")
	flag.StringVar(&dopts.kubeletDir, "kubelet-dir", "/var/lib/kubelet", "--api=dra: the kubelet's root directory (plugins_registry/, plugins/<driver>/)")
	flag.StringVar(&dopts.cdiDir, "cdi-dir", "/var/run/cdi", "--api=dra: where CDI specs for devices with mounts or device nodes are written")
	flag.StringVar(&dopts.kubeconfig, "kubeconfig", "", "--api=dra: kubeconfig file; in-cluster configuration when empty")
	klog.InitFlags(nil)
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: %s [flags]\n\nAdvertises network device pools to kubelet (Device Plugin API v1beta1).\n\nFlags:\n", os.Args[0])
		flag.PrintDefaults()
	}
	showVersion := version.Flag()
	flag.Parse()
	version.Handle(*showVersion, "multinet-deviceplugin")
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unexpected arguments: %v\n", flag.Args())
		flag.Usage()
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var err error
	switch *api {
	case "device-plugin":
		err = run(ctx, *configPath, *dpDir, *devinfoDir, *sysfsRoot)
	case "dra":
		err = runDRA(ctx, *configPath, *devinfoDir, *sysfsRoot, dopts)
	default:
		err = fmt.Errorf("--api=%q: want device-plugin or dra", *api)
	}
	if err != nil {
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

type draFlags struct {
	driverName, nodeName, kubeletDir, cdiDir, kubeconfig string
}

func runDRA(ctx context.Context, configPath, devinfoDir, sysfsRoot string, f draFlags) error {
	cfg, err := config.Load(configPath)
	if err != nil {
		return err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	d, err := dra.New(cfg, pool.Env{SysfsRoot: sysfsRoot}, dra.Options{
		DriverName: f.driverName, NodeName: f.nodeName, Client: client,
		DevInfo: devinfo.Store{Root: devinfoDir}, KubeletDir: f.kubeletDir, CDIDir: f.cdiDir,
	})
	if err != nil {
		return err
	}
	klog.InfoS("Starting DRA driver", "driver", f.driverName, "node", f.nodeName, "pools", len(cfg.Pools))
	return d.Run(ctx)
}
