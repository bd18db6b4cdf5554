package daemon

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/internal/node/nadlookup"
	nadlisters "github.com/multinet/multinet/pkg/client/listers/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/pkg/spec/netconf"
)

// The default network (§6) comes from a NAD, a file, a network name, or the
// conf dir's first file other than multinet's own; network-status names it
// by the NAD key or the CNI network name (§5.3.1).
func TestDefaultNetworkFunc(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write(ownFile, `{"cniVersion":"1.0.0","name":"multinet","plugins":[{"type":"multinet-shim"}]}`)
	write("10-first.conflist", `{"cniVersion":"1.0.0","name":"first","plugins":[{"type":"bridge"}]}`)
	other := write("20-other.conf", `{"cniVersion":"0.4.0","name":"other","type":"ptp"}`)

	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := indexer.Add(&nadv1.NetworkAttachmentDefinition{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "podnet"},
		Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: `{"cniVersion":"1.0.0","type":"macvlan"}`},
	}); err != nil {
		t.Fatal(err)
	}
	// Right after a restart: the informer has not listed yet (it does
	// 100 ms into the read), and kube-system/live is in the API server only
	// (its watch event not delivered).
	start := time.Now()
	nads := &nadlookup.Lookup{
		Cache:  nadlisters.NewNetworkAttachmentDefinitionLister(indexer),
		Synced: func() bool { return time.Since(start) > 100*time.Millisecond },
		Live: func(_ context.Context, ns, name string) (*nadv1.NetworkAttachmentDefinition, error) {
			if ns+"/"+name != "kube-system/live" {
				return nil, apierrors.NewNotFound(nadv1.Resource("network-attachment-definitions"), name)
			}
			return &nadv1.NetworkAttachmentDefinition{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: `{"cniVersion":"1.0.0","type":"ipvlan"}`},
			}, nil
		},
	}

	tests := []struct {
		name              string
		src               DefaultNetworkConfig
		wantList, wantKey string
		wantErr           string
	}{
		{name: "first file, never multinet's own", wantList: "first", wantKey: "first"},
		{name: "by name", src: DefaultNetworkConfig{Name: "other"}, wantList: "other", wantKey: "other"},
		{name: "by file", src: DefaultNetworkConfig{File: other}, wantList: "other", wantKey: "other"},
		{name: "by NAD", src: DefaultNetworkConfig{NAD: "kube-system/podnet"}, wantList: "podnet", wantKey: "kube-system/podnet"},
		{name: "by NAD the informer has not delivered", src: DefaultNetworkConfig{NAD: "kube-system/live"}, wantList: "live", wantKey: "kube-system/live"},
		{name: "NAD missing", src: DefaultNetworkConfig{NAD: "kube-system/nope"}, wantErr: "kube-system/nope"},
		{name: "name missing", src: DefaultNetworkConfig{Name: "nope"}, wantErr: "nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Defaults()
			cfg.CNIConfDir, cfg.DefaultNetwork = dir, tt.src
			cfg.DefaultNetwork.ConfDir = dir
			onDisk := netconf.NewConfDir(netconf.ConfDirOptions{Dir: dir, SkipFile: ownFile})
			list, key, err := defaultNetworkFunc(cfg, onDisk, nads, 5*time.Second, netconf.NewResolver(onDisk, 0))()
			if wantErr(t, err, tt.wantErr) {
				return
			}
			if list.Name != tt.wantList || key != tt.wantKey {
				t.Errorf("default network = list %q key %q, want %q %q", list.Name, key, tt.wantList, tt.wantKey)
			}
		})
	}
}

func TestUniqueDirs(t *testing.T) {
	got := uniqueDirs("/etc/cni/net.d", "", "/etc/cni/net.d/", fileDir("/etc/cni/net.d/10.conf"), fileDir(""), "/other")
	if want := []string{"/etc/cni/net.d", "/other"}; !slices.Equal(got, want) {
		t.Errorf("uniqueDirs = %q, want %q", got, want)
	}
}

// Node layouts: with the daemon in a container (nodeRoot /host), the runtime's
// conf dir, its files and the auxiliary chain's sub-directory are read
// through the node's root with their absolute symlinks resolved there, as
// on a k3s node whose /etc/cni/net.d links into /var/lib/rancher.
func TestConfDirsThroughTheNodeRoot(t *testing.T) {
	root := t.TempDir()
	real := filepath.Join(root, "var/lib/rancher/k3s/agent/etc/cni/net.d")
	for p, content := range map[string]string{
		"var/lib/confs/flannel.conflist":    `{"cniVersion":"1.0.0","name":"cbr0","plugins":[{"type":"flannel"}]}`,
		"var/lib/chains/aux/10-tuning.conf": `{"type":"tuning"}`,
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(real, 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"etc/cni": "/var/lib/rancher/k3s/agent/etc/cni",
		filepath.Join(real, "10-flannel.conflist")[len(root):]: "/var/lib/confs/flannel.conflist",
		filepath.Join(real, "aux")[len(root):]:                 "/var/lib/chains/aux",
	} {
		p := filepath.Join(root, link)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	cfg := Defaults()
	cfg.NodeRoot, cfg.CNIConfDir, cfg.AuxiliaryChain = root, "/etc/cni/net.d", "aux"
	cfg.DefaultNetwork.ConfDir = cfg.CNIConfDir
	onDisk, defaultDir := confDirs(cfg)
	list, key, err := defaultNetworkFunc(cfg, defaultDir, nil, time.Second, netconf.NewResolver(onDisk, 0))()
	if err != nil || list.Name != "cbr0" || key != "cbr0" {
		t.Fatalf("default network = %v, %q, %v; want cbr0 through the linked conf dir and file", list, key, err)
	}
	aux, err := auxiliaryChainFunc(cfg)("1.0.0")
	if err != nil || aux == nil || len(aux.Plugins) != 1 || aux.Plugins[0].Network.Type != "tuning" {
		t.Fatalf("auxiliary chain = %v, %v; want [tuning] from the linked sub-directory", aux, err)
	}
}

// multinetd stops its parts in the reverse order of their start: the CNI
// config writer and the file first (the runtime stops calling the shim),
// the background loops, then the CNI server stops accepting and drains
// before multinet-ipam's server (the in-flight requests' delegates call
// it), and the engine's network-status writes and the records' group
// commit come after both; the metrics server, the delegate launcher, the
// pod resources client and the Event broadcaster last.
func TestComponentsStopInOrder(t *testing.T) {
	var names []string
	for _, c := range (&daemon{}).components() {
		names = append(names, c.Name)
	}
	slices.Reverse(names)
	want := []string{
		"CNI config writer", "CNI config file on exit",
		"network-status retries", "sandbox reaper", "hot-plug",
		"CNI server", "multinet-ipam server", "informers", "attachment engine",
		"network policy", "metrics server", "delegate launcher", "pod resources client", "Event broadcaster",
	}
	if !slices.Equal(names, want) {
		t.Errorf("stop order\n%q, want\n%q", names, want)
	}
}
