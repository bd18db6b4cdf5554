package daemon

import (
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/multinet/multinet/pkg/spec/selection"
)

func TestLoadConfigDefaults(t *testing.T) {
	c, err := LoadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, Defaults()) {
		t.Errorf("LoadConfig(\"\") = %+v, want Defaults()", c)
	}
}

func TestLoadConfig(t *testing.T) {
	tests := []struct {
		name, file, content string
		check               func(t *testing.T, c Config)
		wantErr             string
	}{
		{
			name: "YAML over defaults", file: "c.yaml",
			content: "nodeName: node-a\ndelegateTimeout: 90s\nrequestTimeout: 1m30s\ncniBinDirs: [/opt/cni/bin, /usr/lib/cni]\ndefaultNetwork:\n  name: kindnet\nnamespaceIsolation: true\n",
			check: func(t *testing.T, c Config) {
				want := Defaults()
				want.NodeName = "node-a"
				want.DelegateTimeout = Duration{90 * time.Second}
				want.RequestTimeout = Duration{90 * time.Second}
				want.CNIBinDirs = []string{"/opt/cni/bin", "/usr/lib/cni"}
				want.DefaultNetwork.Name = "kindnet"
				want.NamespaceIsolation = true
				if !reflect.DeepEqual(c, want) {
					t.Errorf("got %+v\nwant %+v", c, want)
				}
			},
		},
		{
			name: "JSON", file: "c.json",
			content: `{"shimTimeout":"2m30s","maxInFlight":4,"nadSyncWait":"30s"}`,
			check: func(t *testing.T, c Config) {
				if c.ShimTimeout.Duration != 150*time.Second || c.MaxInFlight != 4 || c.NADSyncWait.Duration != 30*time.Second || c.SocketPath != Defaults().SocketPath {
					t.Errorf("got %+v", c)
				}
			},
		},
		{
			// Multus's defaultNetworks and systemNamespaces.
			name: "defaultNetworks and systemNamespaces", file: "c.yaml",
			content: "defaultNetworks: [kube-system/sidecar, team-a/mon]\nsystemNamespaces: [kube-system, multinet-system]\n",
			check: func(t *testing.T, c Config) {
				if !reflect.DeepEqual(c.DefaultNetworks, []string{"kube-system/sidecar", "team-a/mon"}) || !reflect.DeepEqual(c.SystemNamespaces, []string{"kube-system", "multinet-system"}) {
					t.Errorf("defaultNetworks %q systemNamespaces %q", c.DefaultNetworks, c.SystemNamespaces)
				}
				want := []selection.Element{{Namespace: "kube-system", Name: "sidecar"}, {Namespace: "team-a", Name: "mon"}}
				if got := c.DefaultNetworkElements(); !reflect.DeepEqual(got, want) {
					t.Errorf("DefaultNetworkElements() = %+v, want %+v", got, want)
				}
			},
		},
		{
			name: "systemNamespaces unset: Multus's kube-system", file: "c.yaml", content: "nodeName: a\n",
			check: func(t *testing.T, c Config) {
				if !reflect.DeepEqual(c.SystemNamespaces, []string{"kube-system"}) || c.DefaultNetworks != nil {
					t.Errorf("systemNamespaces %q defaultNetworks %q, want [kube-system] and none", c.SystemNamespaces, c.DefaultNetworks)
				}
			},
		},
		{
			name: "systemNamespaces empty: none", file: "c.yaml", content: "systemNamespaces: []\n",
			check: func(t *testing.T, c Config) {
				if len(c.SystemNamespaces) != 0 {
					t.Errorf("systemNamespaces %q, want none", c.SystemNamespaces)
				}
			},
		},
		{
			// The network-status write, synchronous unless asked.
			name: "asyncStatus", file: "c.yaml", content: "asyncStatus: true\n",
			check: func(t *testing.T, c Config) {
				if !c.AsyncStatus || Defaults().AsyncStatus {
					t.Errorf("asyncStatus %v (default %v), want true (default false)", c.AsyncStatus, Defaults().AsyncStatus)
				}
			},
		},
		{
			name: "disableHotPlug", file: "c.yaml", content: "disableHotPlug: true\n",
			check: func(t *testing.T, c Config) {
				if !c.DisableHotPlug || Defaults().DisableHotPlug {
					t.Errorf("disableHotPlug %v (default %v), want true (default false)", c.DisableHotPlug, Defaults().DisableHotPlug)
				}
			},
		},
		{name: "asyncStatus not a bool", file: "c.yaml", content: "asyncStatus: async\n", wantErr: "asyncStatus"},
		{name: "defaultNetworks not a list", file: "c.yaml", content: "defaultNetworks: kube-system/sidecar\n", wantErr: "defaultNetworks"},
		{name: "unknown field", file: "c.yaml", content: "nodeName: a\nsocketPth: /x\n", wantErr: `"socketPth"`},
		{name: "unknown nested field", file: "c.yaml", content: "defaultNetwork:\n  nad: a/b\n  conf: x\n", wantErr: `"conf"`},
		{name: "duration without unit", file: "c.yaml", content: "delegateTimeout: 30\n", wantErr: "missing unit"},
		{name: "malformed duration", file: "c.yaml", content: "shimTimeout: soon\n", wantErr: `"soon"`},
		{name: "not YAML", file: "c.yaml", content: "nodeName: [\n", wantErr: "c.yaml"},
		{name: "missing file", file: "", wantErr: "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "missing.yaml")
			if tt.file != "" {
				path = filepath.Join(t.TempDir(), tt.file)
				if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			c, err := LoadConfig(path)
			if !wantErr(t, err, tt.wantErr) {
				tt.check(t, c)
			}
		})
	}
}

// A Duration round-trips through its JSON form.
func TestDurationJSON(t *testing.T) {
	d := Duration{90 * time.Second}
	b, err := d.MarshalJSON()
	if err != nil || string(b) != `"1m30s"` {
		t.Fatalf("MarshalJSON = %s, %v", b, err)
	}
	var back Duration
	if err := back.UnmarshalJSON(b); err != nil || back != d {
		t.Fatalf("UnmarshalJSON(%s) = %v, %v", b, back, err)
	}
}

func TestComplete(t *testing.T) {
	valid := func() Config {
		c := Defaults()
		c.NodeName = "node-a"
		return c
	}
	tests := []struct {
		name    string
		mod     func(c *Config)
		wantErr []string // every substring; none: no error
	}{
		{name: "defaults", mod: func(*Config) {}},
		{name: "default network NAD", mod: func(c *Config) { c.DefaultNetwork.NAD = "kube-system/default" }},
		{name: "two default network sources", mod: func(c *Config) { c.DefaultNetwork.NAD, c.DefaultNetwork.Name = "a/b", "x" }, wantErr: []string{"defaultNetwork", "at most one"}},
		{name: "NAD without namespace", mod: func(c *Config) { c.DefaultNetwork.NAD = "default" }, wantErr: []string{"defaultNetwork.nad", "namespace/name"}},
		{name: "NAD with empty name", mod: func(c *Config) { c.DefaultNetwork.NAD = "ns/" }, wantErr: []string{"defaultNetwork.nad"}},
		{name: "default file is multinet's own", mod: func(c *Config) { c.DefaultNetwork.File = "/etc/cni/net.d/./00-multinet.conflist" }, wantErr: []string{"defaultNetwork.file", "own config file"}},
		{name: "auxiliary chain", mod: func(c *Config) { c.AuxiliaryChain = "vendor-cni-chain" }},
		{name: "auxiliary chain is a path", mod: func(c *Config) { c.AuxiliaryChain = "../etc" }, wantErr: []string{"auxiliaryChain", "not a CNI network name"}},
		{name: "defaultNetworks", mod: func(c *Config) { c.DefaultNetworks = []string{"kube-system/sidecar", "team-a/mon.v2"} }},
		{name: "defaultNetworks plain name (Multus's multusNamespace)", mod: func(c *Config) { c.DefaultNetworks = []string{"kube-system/a", "sidecar"} },
			wantErr: []string{`defaultNetworks[1] "sidecar"`, "namespace/name", "kube-system/sidecar"}},
		{name: "defaultNetworks path (Multus's file form)", mod: func(c *Config) { c.DefaultNetworks = []string{"/etc/cni/net.d/10-side.conf"} },
			wantErr: []string{`defaultNetworks[0] "/etc/cni/net.d/10-side.conf"`, "a path", "§3.4.1"}},
		{name: "defaultNetworks empty name", mod: func(c *Config) { c.DefaultNetworks = []string{"kube-system/"} },
			wantErr: []string{`defaultNetworks[0] "kube-system/"`, `name ""`}},
		{name: "defaultNetworks bad namespace", mod: func(c *Config) { c.DefaultNetworks = []string{"Kube_System/a"} },
			wantErr: []string{`defaultNetworks[0] "Kube_System/a"`, `namespace "Kube_System"`}},
		{name: "defaultNetworks bad name", mod: func(c *Config) { c.DefaultNetworks = []string{"ns/a/b"} },
			wantErr: []string{`defaultNetworks[0] "ns/a/b"`, `name "a/b"`}},
		{name: "defaultNetworks listed twice", mod: func(c *Config) { c.DefaultNetworks = []string{"ns/a", "ns/b", "ns/a"} },
			wantErr: []string{`defaultNetworks[2] "ns/a"`, "listed twice", "defaultNetworks[0]"}},
		{name: "systemNamespaces none", mod: func(c *Config) { c.SystemNamespaces = nil }},
		{name: "systemNamespaces bad name", mod: func(c *Config) { c.SystemNamespaces = []string{"kube-system", "Admin"} },
			wantErr: []string{`systemNamespaces[1] "Admin"`}},
		{name: "undeclaredCapabilities multus", mod: func(c *Config) { c.UndeclaredCapabilities = "multus" }},
		{name: "undeclaredCapabilities refuse", mod: func(c *Config) { c.UndeclaredCapabilities = "refuse" }},
		{name: "undeclaredCapabilities unknown", mod: func(c *Config) { c.UndeclaredCapabilities = "allow" },
			wantErr: []string{`undeclaredCapabilities "allow"`, `"refuse"`, `"multus"`}},
		{name: "reaping off", mod: func(c *Config) { c.ReapInterval = Duration{} }},
		{name: "reaping without a runtime", mod: func(c *Config) { c.RuntimeEndpoint, c.ReapMinAge = "", Duration{} }},
		{name: "negative reap interval", mod: func(c *Config) { c.ReapInterval = Duration{-time.Second} }, wantErr: []string{"reapInterval"}},
		{name: "reap min age within an ADD", mod: func(c *Config) { c.ReapMinAge = Duration{time.Minute} },
			wantErr: []string{"reapMinAge 1m0s", "shimTimeout 2m0s"}},
		{name: "relative socket", mod: func(c *Config) { c.SocketPath = "run/x.sock" }, wantErr: []string{"socketPath"}},
		{name: "multinet-ipam off", mod: func(c *Config) { c.IPAMSocketPath, c.IPAMReconcileInterval = "none", Duration{} }},
		{name: "relative ipam socket", mod: func(c *Config) { c.IPAMSocketPath = "ipam.sock" }, wantErr: []string{"ipamSocketPath"}},
		{name: "ipam socket is the shim's", mod: func(c *Config) { c.IPAMSocketPath = c.SocketPath }, wantErr: []string{"ipamSocketPath", "other than socketPath"}},
		{name: "negative ipam reconcile interval", mod: func(c *Config) { c.IPAMReconcileInterval = Duration{-time.Second} }, wantErr: []string{"ipamReconcileInterval"}},
		{name: "conf file not a conflist", mod: func(c *Config) { c.ConfFileName = "00-multinet.conf" }, wantErr: []string{"confFileName"}},
		{name: "conf file with a slash", mod: func(c *Config) { c.ConfFileName = "a/00-multinet.conflist" }, wantErr: []string{"confFileName"}},
		{name: "no state dir", mod: func(c *Config) { c.StateDir = "" }, wantErr: []string{"stateDir"}},
		{name: "no concurrency", mod: func(c *Config) { c.MaxInFlight = 0 }, wantErr: []string{"maxInFlight"}},
		{name: "zero timeout", mod: func(c *Config) { c.DelegateTimeout = Duration{} }, wantErr: []string{"delegateTimeout"}},
		{name: "zero NAD sync wait", mod: func(c *Config) { c.NADSyncWait = Duration{} }, wantErr: []string{"nadSyncWait", "positive"}},
		{name: "request outlives shim", mod: func(c *Config) { c.RequestTimeout = Duration{3 * time.Minute} }, wantErr: []string{"requestTimeout", "shimTimeout"}},
		{name: "several errors at once", mod: func(c *Config) { c.StateDir, c.MaxInFlight = "", -1 }, wantErr: []string{"stateDir", "maxInFlight"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.mod(&c)
			err := c.Complete()
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Complete: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Complete succeeded, want an error naming %q", tt.wantErr)
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("Complete error %q does not name %q", err, s)
				}
			}
		})
	}
}

// Complete fills the node name (NODE_NAME, else the host name in lower
// case) and the default network's conf dir.
func TestCompleteFills(t *testing.T) {
	t.Setenv("NODE_NAME", "")
	c := Defaults()
	if err := c.Complete(); err != nil {
		t.Fatal(err)
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	if c.NodeName != strings.ToLower(host) {
		t.Errorf("NodeName = %q, want the host name %q in lower case", c.NodeName, host)
	}
	if c.DefaultNetwork.ConfDir != c.CNIConfDir {
		t.Errorf("DefaultNetwork.ConfDir = %q, want CNIConfDir %q", c.DefaultNetwork.ConfDir, c.CNIConfDir)
	}
	// multinet-ipam's socket: next to the shim's, the plugin's default.
	if c.IPAMSocketPath != "/run/multinet/ipam.sock" {
		t.Errorf("IPAMSocketPath = %q, want /run/multinet/ipam.sock", c.IPAMSocketPath)
	}

	t.Setenv("NODE_NAME", "node-from-env")
	c = Defaults()
	c.DefaultNetwork.ConfDir = "/other"
	if err := c.Complete(); err != nil {
		t.Fatal(err)
	}
	if c.NodeName != "node-from-env" || c.DefaultNetwork.ConfDir != "/other" {
		t.Errorf("NodeName %q ConfDir %q, want node-from-env and /other kept", c.NodeName, c.DefaultNetwork.ConfDir)
	}
}

// wantErr fails t unless err contains want, or is nil when want is empty,
// and reports whether an error was wanted.
func wantErr(t *testing.T, err error, want string) bool {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Fatalf("error = %v, want one containing %q", err, want)
	}
	return want != ""
}

// maxInFlight's default is MaxInFlightPerCPU slots per CPU the daemon may
// use (GOMAXPROCS, which follows a CPU limit), never fewer than
// MinMaxInFlight: 32 on the measured 2-CPU node (docs/bench.md "Slot pool
// and CPU request").
func TestDefaultMaxInFlight(t *testing.T) {
	for _, tt := range []struct{ procs, want int }{
		{procs: -1, want: 16}, {procs: 0, want: 16}, {procs: 1, want: 16},
		{procs: 2, want: 32}, {procs: 4, want: 64}, {procs: 64, want: 1024},
	} {
		if got := DefaultMaxInFlight(tt.procs); got != tt.want {
			t.Errorf("DefaultMaxInFlight(%d) = %d, want %d", tt.procs, got, tt.want)
		}
	}

	// The loaded default follows the node's CPUs (the delegates'), not
	// GOMAXPROCS (multinetd's own goroutines: 1 in the DaemonSet).
	prev := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	for _, procs := range []int{1, 3} {
		runtime.GOMAXPROCS(procs)
		c, err := LoadConfig("")
		if err != nil {
			t.Fatal(err)
		}
		if want := DefaultMaxInFlight(runtime.NumCPU()); c.MaxInFlight != want || Defaults().MaxInFlight != want {
			t.Errorf("GOMAXPROCS %d, %d CPUs: loaded maxInFlight %d, Defaults() %d, want %d", procs, runtime.NumCPU(), c.MaxInFlight, Defaults().MaxInFlight, want)
		}
	}
	runtime.GOMAXPROCS(2)
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("maxInFlight: 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err := LoadConfig(path); err != nil || c.MaxInFlight != 5 {
		t.Errorf("maxInFlight: 5 loaded as %d (%v): a configured value wins over the derived default", c.MaxInFlight, err)
	}
}
