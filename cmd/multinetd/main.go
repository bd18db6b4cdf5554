// Command multinetd is multinet's node daemon: it serves the CNI operations
// multinet-shim forwards (ADD, DEL, CHECK, GC, STATUS), attaching pods to the
// cluster-wide default network and to every network their
// k8s.v1.cni.cncf.io/networks annotation selects (NPWG multi-net spec v1.3),
// and writes their network-status. docs/multinetd.md describes the
// configuration.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/multinet/multinet/internal/node/criruntime"
	"github.com/multinet/multinet/internal/node/daemon"
	"github.com/multinet/multinet/internal/node/nodeexec"
	"github.com/multinet/multinet/internal/process/version"
)

func main() {
	// The delegate launcher (docs/decisions/deploy.md) is this binary too.
	nodeexec.MaybeServeLauncher()
	def := daemon.Defaults()
	configPath := flag.String("config", "", "daemon configuration file (YAML or JSON); flags override it")
	nodeName := flag.String("node-name", "", "node whose pods this daemon serves (default $NODE_NAME, else the host name)")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig path (default: in-cluster config)")
	socketPath := flag.String("socket-path", "", "shim socket path (default "+def.SocketPath+")")
	confDir := flag.String("cni-conf-dir", "", "container runtime's CNI conf dir (default: the runtime's, asked through the CRI at runtimeEndpoint, else "+daemon.DefaultCNIConfDir+")")
	binDirs := flag.String("cni-bin-dirs", "", "delegate plugin dirs, ':'-separated (default: the runtime's, asked through the CRI at runtimeEndpoint, else the CNI_PATH of each request)")
	stateDir := flag.String("state-dir", "", "attachment records dir (default "+def.StateDir+")")
	defaultNAD := flag.String("default-network-nad", "", "default network: NetworkAttachmentDefinition namespace/name")
	defaultFile := flag.String("default-network-file", "", "default network: CNI config file path")
	defaultName := flag.String("default-network-name", "", "default network: CNI network name in --default-network-conf-dir")
	defaultConfDir := flag.String("default-network-conf-dir", "", "dir holding the default network's config (default: --cni-conf-dir)")
	podResources := flag.String("podresources-socket", "", "kubelet PodResources socket (default "+def.PodResourcesSocket+")")
	metricsAddr := flag.String("metrics-address", "", "address of /metrics, /healthz, /readyz (default "+def.MetricsAddress+")")
	removeConf := flag.Bool("remove-cni-config-on-exit", os.Getenv("MULTINET_REMOVE_CNI_CONFIG_ON_EXIT") == "true",
		"remove the CNI config file when stopping (uninstall; default $MULTINET_REMOVE_CNI_CONFIG_ON_EXIT == \"true\")")
	klog.InitFlags(nil)
	showVersion := version.Flag()
	flag.Parse()
	version.Handle(*showVersion, "multinetd")
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unexpected arguments: %v\n", flag.Args())
		os.Exit(2)
	}

	cfg, err := daemon.LoadConfig(*configPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	override := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	override(&cfg.NodeName, *nodeName)
	override(&cfg.Kubeconfig, *kubeconfig)
	override(&cfg.SocketPath, *socketPath)
	override(&cfg.CNIConfDir, *confDir)
	override(&cfg.StateDir, *stateDir)
	override(&cfg.DefaultNetwork.NAD, *defaultNAD)
	override(&cfg.DefaultNetwork.File, *defaultFile)
	override(&cfg.DefaultNetwork.Name, *defaultName)
	override(&cfg.DefaultNetwork.ConfDir, *defaultConfDir)
	override(&cfg.PodResourcesSocket, *podResources)
	override(&cfg.MetricsAddress, *metricsAddr)
	if *removeConf {
		cfg.RemoveCNIConfigOnExit = true
	}
	if *binDirs != "" {
		cfg.CNIBinDirs = strings.Split(*binDirs, ":")
	}
	// cniConfDir and cniBinDirs left unset: the runtime's own, else the
	// defaults; logged once with where each came from.
	cfg.ResolveRuntimeCNI(context.Background(), criruntime.Discover).Log(klog.Background())
	if err := cfg.Complete(); err != nil {
		fmt.Fprintf(os.Stderr, "invalid configuration: %v\n", err)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background())
	if err := daemon.Run(ctx, cfg); err != nil {
		klog.ErrorS(err, "multinetd failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}
