// Command multinet-install is the init container of the multinetd
// DaemonSet. It copies the CNI plugins shipped in the image (multinet-shim,
// multinet-netdev, multinet-ipam) into the node's CNI bin dir atomically (temporary file +
// rename: a shim the runtime is executing is never overwritten in place, so
// never "text file busy"), warns about delegates in that dir the daemon
// cannot run from its container, and optionally waits until the default
// network's CNI config exists.
//
// With --uninstall it removes what multinet wrote on the node instead:
// multinet's CNI config, the plugins, the state and socket dirs
// (docs/install.md; run through `kubectl debug node/NAME` with --root /host).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode"
)

func main() {
	srcDir := flag.String("src-dir", "/opt/multinet/cni/bin", "directory of the plugins to install")
	binDir := flag.String("cni-bin-dir", "/opt/cni/bin", "the node's CNI bin dir (a hostPath mount)")
	plugins := flag.String("plugins", "multinet-shim,multinet-netdev,multinet-ipam", "comma-separated plugin names to install (or remove)")
	confDir := flag.String("cni-conf-dir", "/etc/cni/net.d", "the node's CNI conf dir")
	confFile := flag.String("conf-file-name", "00-multinet.conflist", "multinet's own CNI config file (written by multinetd)")
	waitDefault := flag.Bool("wait-for-default-network", false, "wait until --cni-conf-dir holds a CNI config besides --conf-file-name (the cluster's default network)")
	waitFile := flag.String("default-network-file", "", "wait until this CNI config file exists and is not empty (implies waiting)")
	waitTimeout := flag.Duration("wait-timeout", 0, "give up waiting after this long (0: wait forever)")
	doUninstall := flag.Bool("uninstall", false, "remove multinet's CNI config, plugins, --state-dir and --socket-dir instead of installing")
	root := flag.String("root", "", "with --uninstall: prefix of every path (e.g. /host under kubectl debug node/...)")
	stateDir := flag.String("state-dir", "", "with --uninstall: multinetd's state dir to remove (e.g. /var/lib/multinet)")
	socketDir := flag.String("socket-dir", "", "with --uninstall: multinetd's socket dir to remove (e.g. /run/multinet)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "multinet-install: unexpected arguments: %v\n", flag.Args())
		os.Exit(2)
	}
	names := splitList(*plugins)

	if *doUninstall {
		files := []string{filepath.Join(*confDir, *confFile)}
		for _, n := range names {
			files = append(files, filepath.Join(*binDir, n))
		}
		var dirs []string
		for _, d := range []string{*stateDir, *socketDir} {
			if d != "" {
				dirs = append(dirs, d)
			}
		}
		removed, err := uninstall(*root, files, dirs)
		for _, p := range removed {
			fmt.Printf("removed %s\n", p)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "multinet-install: %v\n", err)
			os.Exit(1)
		}
		return
	}

	report, err := installPlugins(*srcDir, *binDir, names)
	for _, l := range report {
		fmt.Println(l)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "multinet-install: %v\n", err)
		os.Exit(1)
	}

	if !*waitDefault && *waitFile == "" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if *waitTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *waitTimeout)
		defer cancel()
	}
	found := func() (string, error) { return defaultNetworkConfig(*confDir, *confFile) }
	what := fmt.Sprintf("a CNI config in %s besides %s", *confDir, *confFile)
	if *waitFile != "" {
		found, what = nonEmptyFile(*waitFile), *waitFile
	}
	fmt.Printf("waiting for the default network: %s\n", what)
	p, err := waitFor(ctx, time.Second, found, func(d time.Duration) {
		fmt.Printf("still waiting for %s (%s)\n", what, d)
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "multinet-install: waiting for %s: %v\n", what, err)
		os.Exit(1)
	}
	fmt.Printf("default network config: %s\n", p)
}

// splitList splits a comma-separated flag value (blanks ignored).
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
}
