package netconf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types/create"
)

// Spec §3.2.1 example.
const specBridgeConf = `{
    "cniVersion": "0.3.0",
    "name": "a-bridge-network",
    "type": "bridge",
    "bridge": "br0",
    "isGateway": true,
    "ipam": {
      "type": "host-local",
      "subnet": "192.168.5.0/24",
      "dataDir": "/mnt/cluster-ipam"
    }
}`

// Spec §3.2.2 example (the export lost the plugins' opening braces; restored).
const specBridgeConfList = `{
  "cniVersion": "0.3.0",
  "name": "another-bridge-network",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "br0",
      "ipam": {
        "type": "host-local",
        "subnet": "192.168.5.0/24"
      }
    },
    {
      "type": "port-forwarding"
    },
    {
      "type": "tuning",
      "sysctl": {
        "net.ipv4.conf.all.log_martians": "1"
      }
    }
  ]
}`

// Spec §3.2.3 / §3.4.2.1 example ("thick" plugin).
const specThickConf = `{
      "cniVersion": "0.3.0",
      "type": "awesome-plugin"
}`

func pluginTypes(l *libcni.NetworkConfigList) []string {
	var out []string
	for _, p := range l.Plugins {
		out = append(out, p.Network.Type)
	}
	return out
}

func jsonEqual(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got invalid JSON %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want invalid JSON %s: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("JSON differs:\n got  %s\n want %s", got, want)
	}
}

// assertSelfContained checks that list.Bytes alone reproduces the list, as
// internal/node/state relies on for DEL.
func assertSelfContained(t *testing.T, l *libcni.NetworkConfigList) {
	t.Helper()
	re, err := libcni.NetworkConfFromBytes(l.Bytes)
	if err != nil {
		t.Fatalf("list bytes do not re-parse: %v", err)
	}
	if re.Name != l.Name || re.CNIVersion != l.CNIVersion || len(re.Plugins) != len(l.Plugins) {
		t.Fatalf("re-parsed list %q/%q/%d plugins, want %q/%q/%d", re.Name, re.CNIVersion, len(re.Plugins), l.Name, l.CNIVersion, len(l.Plugins))
	}
	for i := range l.Plugins {
		jsonEqual(t, re.Plugins[i].Bytes, string(l.Plugins[i].Bytes))
	}
}

func TestResolveSpecConfig(t *testing.T) {
	tests := []struct {
		name        string
		nad         string
		config      string
		wantName    string
		wantVersion string
		wantTypes   []string
		wantPlugin0 string // JSON of plugins[0], when set
	}{
		{name: "§3.2.1 single config becomes a one-plugin list", nad: "a-bridge-network", config: specBridgeConf,
			wantName: "a-bridge-network", wantVersion: "0.3.0", wantTypes: []string{"bridge"}, wantPlugin0: specBridgeConf},
		{name: "§3.2.2 configlist", nad: "another-bridge-network", config: specBridgeConfList,
			wantName: "another-bridge-network", wantVersion: "0.3.0", wantTypes: []string{"bridge", "port-forwarding", "tuning"}},
		{name: "§3.4.2.1 name injection for the thick plugin config", nad: "a-bridge-network", config: specThickConf,
			wantName: "a-bridge-network", wantVersion: "0.3.0", wantTypes: []string{"awesome-plugin"},
			wantPlugin0: `{"cniVersion":"0.3.0","name":"a-bridge-network","type":"awesome-plugin"}`},
		{name: "§3.4.2 empty name counts as omitted", nad: "thick", config: `{"cniVersion":"1.0.0","name":"","type":"t"}`,
			wantName: "thick", wantVersion: "1.0.0", wantTypes: []string{"t"}},
		{name: "§3.4.2 name injection into a configlist", nad: "listnet", config: `{"cniVersion":"1.0.0","plugins":[{"type":"a"},{"type":"b"}]}`,
			wantName: "listnet", wantVersion: "1.0.0", wantTypes: []string{"a", "b"}},
		{name: "§3.4.3 a config name different from the NAD name is kept", nad: "nad-name", config: `{"cniVersion":"1.1.0","name":"cni-name","type":"macvlan"}`,
			wantName: "cni-name", wantVersion: "1.1.0", wantTypes: []string{"macvlan"}},
		{name: "cniVersions picks the highest supported", nad: "v", config: `{"cniVersions":["0.4.0","1.0.0","9.0.0"],"name":"v","plugins":[{"type":"a"}]}`,
			wantName: "v", wantVersion: "1.0.0", wantTypes: []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := Resolve("ns1", tt.nad, tt.config, nil)
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if l.Name != tt.wantName || l.CNIVersion != tt.wantVersion {
				t.Errorf("name/cniVersion = %q/%q, want %q/%q", l.Name, l.CNIVersion, tt.wantName, tt.wantVersion)
			}
			if got := pluginTypes(l); !reflect.DeepEqual(got, tt.wantTypes) {
				t.Errorf("plugin types = %v, want %v", got, tt.wantTypes)
			}
			if tt.wantPlugin0 != "" {
				jsonEqual(t, l.Plugins[0].Bytes, tt.wantPlugin0)
			}
			assertSelfContained(t, l)
		})
	}
}

func TestResolveSpecConfigErrors(t *testing.T) {
	tests := []struct {
		name      string
		config    string
		wantField string
		wantText  string
	}{
		{"not JSON", `{"cniVersion":`, "", "not a JSON object"},
		{"JSON null", `null`, "", "not a JSON object"},
		{"JSON array", `[{"type":"a"}]`, "", "not a JSON object"},
		{"whitespace only", `  `, "", "not a JSON object"},
		{"single config without type", `{"cniVersion":"1.0.0","name":"n"}`, "type", "missing"},
		{"single config with empty type", `{"cniVersion":"1.0.0","name":"n","type":""}`, "type", "type"},
		{"single config with numeric type", `{"cniVersion":"1.0.0","name":"n","type":5}`, "type", "type"},
		{"list plugin without type", `{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"a"},{"bridge":"br0"}]}`, "plugins[1].type", "type"},
		{"type with a path separator", `{"cniVersion":"1.0.0","name":"n","type":"../../bin/sh"}`, "type", "path separator"},
		{"type with a backslash", `{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"a\\b"}]}`, "plugins[0].type", "path separator"},
		{"type dot-dot", `{"cniVersion":"1.0.0","name":"n","type":".."}`, "type", "not a plugin binary name"},
		{"type is multinet's shim", `{"cniVersion":"1.0.0","name":"n","type":"multinet-shim"}`, "type", "shim"},
		{"list with null cniVersion", `{"cniVersion":null,"name":"n","plugins":[{"type":"a"}]}`, "cniVersion", "cniVersion"},
		{"unsupported cniVersion", `{"cniVersion":"2.0.0","name":"n","type":"a"}`, "cniVersion", "not a CNI version"},
		{"garbage cniVersion", `{"cniVersion":"banana","name":"n","type":"a"}`, "cniVersion", "not a CNI version"},
		{"numeric cniVersion", `{"cniVersion":1,"name":"n","type":"a"}`, "cniVersion", "cniVersion"},
		{"name not a string", `{"cniVersion":"1.0.0","name":7,"type":"a"}`, "name", "not a string"},
		{"name with invalid characters", `{"cniVersion":"1.0.0","name":"a b","type":"a"}`, "name", "invalid characters"},
		{"plugins not an array", `{"cniVersion":"1.0.0","name":"n","plugins":{"type":"a"}}`, "plugins", "plugins"},
		{"plugins empty", `{"cniVersion":"1.0.0","name":"n","plugins":[]}`, "plugins", "no plugins"},
		{"capabilities wrong type", `{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"a","capabilities":{"ips":"yes"}}]}`, "plugins[0].capabilities", "capabilities"},
		{"disableCheck wrong value", `{"cniVersion":"1.0.0","name":"n","disableCheck":"maybe","plugins":[{"type":"a"}]}`, "disableCheck", "disableCheck"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Resolve("ns1", "nad1", tt.config, nil)
			if err == nil {
				t.Fatal("Resolve succeeded, want error")
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *ConfigError", err)
			}
			if ce.Field != tt.wantField {
				t.Errorf("field = %q, want %q (error: %v)", ce.Field, tt.wantField, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, "NetworkAttachmentDefinition ns1/nad1") || !strings.Contains(msg, "spec.config") {
				t.Errorf("error %q does not name the NAD and spec.config", msg)
			}
			if !strings.Contains(msg, tt.wantText) {
				t.Errorf("error %q does not contain %q", msg, tt.wantText)
			}
		})
	}
}

func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestResolveOnDisk(t *testing.T) {
	dir := t.TempDir()
	// Lexically the .conf comes first, but §3.4.1 puts configlists first.
	writeFile(t, dir, "10-net-a.conf", `{"cniVersion":"1.0.0","name":"net-a","type":"from-conf"}`)
	writeFile(t, dir, "20-net-a.conflist", `{"cniVersion":"1.0.0","name":"net-a","plugins":[{"type":"from-conflist"}]}`)
	writeFile(t, dir, "30-net-b.json", `{"cniVersion":"0.4.0","name":"net-b","type":"from-json"}`)
	writeFile(t, dir, "40-net-c.conf", `{"cniVersion":"0.4.0","name":"net-c","type":"from-conf"}`)
	writeFile(t, dir, "41-net-c.conf", `{"cniVersion":"0.4.0","name":"net-c","type":"second"}`)
	writeFile(t, dir, "50-ignored.txt", `{"cniVersion":"0.4.0","name":"net-d","type":"txt"}`)
	cd := NewConfDir(ConfDirOptions{Dir: dir, SkipFile: "00-multinet.conflist"})

	tests := []struct {
		name      string
		nad       string
		spec      string
		wantTypes []string
		wantErr   string
	}{
		{name: "§3.2.4/§3.4.1 rule 2: configlist before config", nad: "net-a", wantTypes: []string{"from-conflist"}},
		{name: "§3.4.1 rule 3: .json config", nad: "net-b", wantTypes: []string{"from-json"}},
		{name: "§3.4.1 rule 3: lexically first config of that name", nad: "net-c", wantTypes: []string{"from-conf"}},
		{name: "§3.4.1 rule 1: spec.config wins over disk", nad: "net-a", spec: `{"cniVersion":"1.0.0","type":"from-spec"}`, wantTypes: []string{"from-spec"}},
		{name: "§3.4.1 rule 4: nothing found fails", nad: "net-d", wantErr: `NetworkAttachmentDefinition ns/net-d: spec.config: empty, and no .conflist, .conf or .json file in ` + dir + ` has "name": "net-d"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := Resolve("ns", tt.nad, tt.spec, cd)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrNotFound) {
					t.Fatalf("error = %v, want one containing %q wrapping ErrNotFound", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := pluginTypes(l); !reflect.DeepEqual(got, tt.wantTypes) {
				t.Errorf("plugin types = %v, want %v", got, tt.wantTypes)
			}
			assertSelfContained(t, l)
		})
	}

	t.Run("no directory", func(t *testing.T) {
		_, err := Resolve("ns", "net-a", "", nil)
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "ns/net-a") {
			t.Fatalf("error = %v, want ErrNotFound naming ns/net-a", err)
		}
	})
}

func TestConfDirSkipsOwnAndShimAndBrokenFiles(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "00-multinet.conflist", `{"cniVersion":"1.0.0","name":"net-a","plugins":[{"type":"own-file"}]}`)
	writeFile(t, dir, "05-shim.conflist", `{"cniVersion":"1.0.0","name":"net-a","plugins":[{"type":"multinet-shim"}]}`)
	writeFile(t, dir, "07-broken.conflist", `{"cniVersion":"1.0.0","name":"net-a","plugins":[{"type":`)
	writeFile(t, dir, "10-real.conflist", `{"cniVersion":"1.0.0","name":"net-a","plugins":[{"type":"real"}]}`)
	cd := NewConfDir(ConfDirOptions{Dir: dir, SkipFile: "00-multinet.conflist"})

	l, err := cd.Lookup("net-a")
	if err != nil {
		t.Fatal(err)
	}
	if got := pluginTypes(l); !reflect.DeepEqual(got, []string{"real"}) {
		t.Fatalf("plugin types = %v, want [real]", got)
	}
	_, err = cd.Lookup("other")
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("error = %v, want ErrNotFound", err)
	}
	if !strings.Contains(err.Error(), "07-broken.conflist") {
		t.Errorf("not-found error %q does not mention the unparsable file", err)
	}
	if strings.Contains(err.Error(), "05-shim") || strings.Contains(err.Error(), "00-multinet") {
		t.Errorf("not-found error %q mentions multinet's own configs", err)
	}

	l, path, err := cd.First()
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(dir, "10-real.conflist") || l.Plugins[0].Network.Type != "real" {
		t.Errorf("First() = %s (%v), want 10-real.conflist", path, pluginTypes(l))
	}
}

func TestConfDirFollowsChanges(t *testing.T) {
	dir := t.TempDir()
	cd := NewConfDir(ConfDirOptions{Dir: dir})
	if _, err := cd.Lookup("net-a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("empty dir: error = %v, want ErrNotFound", err)
	}
	p := writeFile(t, dir, "10-a.conf", `{"cniVersion":"1.0.0","name":"net-a","type":"v1"}`)
	l, err := cd.Lookup("net-a")
	if err != nil || l.Plugins[0].Network.Type != "v1" {
		t.Fatalf("after create: %v, %v", l, err)
	}
	// Rewrite in place, same size, and force a distinct mtime.
	writeFile(t, dir, "10-a.conf", `{"cniVersion":"1.0.0","name":"net-a","type":"v2"}`)
	later := time.Now().Add(2 * time.Second)
	if err := os.Chtimes(p, later, later); err != nil {
		t.Fatal(err)
	}
	l, err = cd.Lookup("net-a")
	if err != nil || l.Plugins[0].Network.Type != "v2" {
		t.Fatalf("after rewrite: %v, %v", pluginTypes(l), err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if _, err := cd.Lookup("net-a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after remove: error = %v, want ErrNotFound", err)
	}
	if len(cd.files) != 0 {
		t.Errorf("cache keeps %d entries for removed files", len(cd.files))
	}
	// Missing directory holds no configs.
	gone := NewConfDir(ConfDirOptions{Dir: filepath.Join(dir, "missing")})
	if _, err := gone.Lookup("net-a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing dir: error = %v, want ErrNotFound", err)
	}
}

func TestConfDirSubdirectoryPlugins(t *testing.T) {
	// CNI spec 1.1: a .conflist without "plugins" takes them from <dir>/<name>/*.conf.
	dir := t.TempDir()
	writeFile(t, dir, "10-split.conflist", `{"cniVersion":"1.1.0","name":"split"}`)
	writeFile(t, dir, "split/1-main.conf", `{"type":"macvlan","master":"eth0"}`)
	writeFile(t, dir, "split/2-tune.conf", `{"type":"tuning"}`)
	writeFile(t, dir, "20-mixed.conflist", `{"cniVersion":"1.1.0","name":"mixed","plugins":[{"type":"inline"}]}`)
	writeFile(t, dir, "mixed/1.conf", `{"type":"extra"}`)
	writeFile(t, dir, "30-inlineonly.conflist", `{"cniVersion":"1.1.0","name":"inlineonly","loadOnlyInlinedPlugins":true,"plugins":[{"type":"inline"}]}`)
	writeFile(t, dir, "inlineonly/1.conf", `{"type":"ignored"}`)
	writeFile(t, dir, "40-empty.conflist", `{"cniVersion":"1.1.0","name":"empty"}`)
	writeFile(t, dir, "50-evil.conflist", `{"cniVersion":"1.1.0","name":"evil"}`)
	writeFile(t, dir, "evil/1.conf", `{"type":"../sh"}`)
	cd := NewConfDir(ConfDirOptions{Dir: dir})

	for name, want := range map[string][]string{
		"split":      {"macvlan", "tuning"},
		"mixed":      {"inline", "extra"},
		"inlineonly": {"inline"},
	} {
		l, err := cd.Lookup(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := pluginTypes(l); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: plugin types = %v, want %v", name, got, want)
		}
		assertSelfContained(t, l)
	}
	if _, err := cd.Lookup("empty"); err == nil || !strings.Contains(err.Error(), "none inline") {
		t.Errorf("conflist without plugins: error = %v", err)
	}
	if _, err := cd.Lookup("evil"); err == nil || !strings.Contains(err.Error(), "path separator") {
		t.Errorf("sub-directory plugin with a path type: error = %v", err)
	}
}

func TestLoadDefault(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "00-multinet.conflist", `{"cniVersion":"1.0.0","name":"multinet","plugins":[{"type":"multinet-shim"}]}`)
	writeFile(t, dir, "05-bad.conf", `not json`)
	writeFile(t, dir, "10-flannel.conflist", `{"cniVersion":"1.0.0","name":"cbr0","plugins":[{"type":"flannel"},{"type":"portmap","capabilities":{"portMappings":true}}]}`)
	writeFile(t, dir, "20-other.conf", `{"cniVersion":"1.0.0","name":"other","type":"bridge"}`)
	outside := writeFile(t, t.TempDir(), "calico.conflist", `{"cniVersion":"1.0.0","name":"k8s-pod-network","plugins":[{"type":"calico"}]}`)
	cd := NewConfDir(ConfDirOptions{Dir: dir, SkipFile: "00-multinet.conflist"})

	tests := []struct {
		name      string
		src       DefaultNetwork
		dir       *ConfDir
		wantName  string
		wantLabel string
		wantErr   string
	}{
		{name: "§6 lexically first usable file", src: DefaultNetwork{}, dir: cd, wantName: "cbr0", wantLabel: filepath.Join(dir, "10-flannel.conflist")},
		{name: "by network name", src: DefaultNetwork{Name: "other"}, dir: cd, wantName: "other", wantLabel: "other"},
		{name: "by path", src: DefaultNetwork{Path: outside}, dir: cd, wantName: "k8s-pod-network", wantLabel: outside},
		{name: "by path without a conf dir", src: DefaultNetwork{Path: outside}, wantName: "k8s-pod-network", wantLabel: outside},
		{name: "by NAD with spec.config", src: DefaultNetwork{NAD: &NADConfig{Namespace: "kube-system", Name: "def", Config: `{"cniVersion":"1.0.0","type":"ovn"}`}}, wantName: "def", wantLabel: "kube-system/def"},
		{name: "by NAD without spec.config", src: DefaultNetwork{NAD: &NADConfig{Namespace: "kube-system", Name: "cbr0"}}, dir: cd, wantName: "cbr0", wantLabel: "kube-system/cbr0"},
		{name: "two sources", src: DefaultNetwork{Name: "a", Path: outside}, dir: cd, wantErr: "only one"},
		{name: "unknown name", src: DefaultNetwork{Name: "nope"}, dir: cd, wantErr: "no .conflist"},
		{name: "path with bad extension", src: DefaultNetwork{Path: "/etc/passwd"}, dir: cd, wantErr: "extension"},
		{name: "path to the shim's own config", src: DefaultNetwork{Path: filepath.Join(dir, "00-multinet.conflist")}, dir: cd, wantErr: "shim"},
		{name: "empty directory", src: DefaultNetwork{}, dir: NewConfDir(ConfDirOptions{Dir: t.TempDir()}), wantErr: "no usable CNI config file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, label, err := LoadDefault(tt.src, tt.dir)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if l.Name != tt.wantName || label != tt.wantLabel {
				t.Errorf("got %q labelled %q, want %q labelled %q", l.Name, label, tt.wantName, tt.wantLabel)
			}
		})
	}
}

func TestResolverMemo(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "10-disk.conf", `{"cniVersion":"1.0.0","name":"disk","type":"v1"}`)
	r := NewResolver(NewConfDir(ConfDirOptions{Dir: dir}), 2)

	a1, err := r.Resolve("ns", "a", specThickConf)
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := r.Resolve("ns", "a", specThickConf)
	if a1 != a2 {
		t.Error("unchanged spec.config was parsed again")
	}
	// Same spec.config text under another NAD name: its own entry, its own name (§3.4.2).
	b, _ := r.Resolve("ns", "b", specThickConf)
	if b.Name != "b" || a1.Name != "a" {
		t.Errorf("names %q, %q; want a, b", a1.Name, b.Name)
	}
	// A changed spec.config is parsed again.
	a3, err := r.Resolve("ns", "a", `{"cniVersion":"1.0.0","type":"changed"}`)
	if err != nil || a3.Plugins[0].Network.Type != "changed" {
		t.Fatalf("after change: %v, %v", a3, err)
	}
	// Errors are returned, not memoized over a good entry.
	if _, err := r.Resolve("ns", "a", `{`); err == nil {
		t.Fatal("bad spec.config accepted")
	}
	if a4, _ := r.Resolve("ns", "a", `{"cniVersion":"1.0.0","type":"changed"}`); a4 != a3 {
		t.Error("good entry lost after an error")
	}
	// Bounded: a third NAD empties the memo of two.
	if _, err := r.Resolve("ns", "c", specThickConf); err != nil {
		t.Fatal(err)
	}
	if len(r.memo) != 1 {
		t.Errorf("memo holds %d entries, want 1 after overflow", len(r.memo))
	}
	r.Forget("ns", "c")
	if len(r.memo) != 0 {
		t.Errorf("memo holds %d entries after Forget", len(r.memo))
	}
	// Empty spec.config goes to disk.
	d, err := r.Resolve("ns", "disk", "")
	if err != nil || d.Plugins[0].Network.Type != "v1" {
		t.Fatalf("on-disk: %v, %v", d, err)
	}
}

func TestConfDirConcurrentLookups(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "10-a.conflist", `{"cniVersion":"1.0.0","name":"net-a","plugins":[{"type":"a"}]}`)
	cd := NewConfDir(ConfDirOptions{Dir: dir})
	r := NewResolver(cd, 0)
	done := make(chan error, 4)
	for g := range 4 {
		go func() {
			for i := range 200 {
				if g == 0 && i%20 == 0 {
					// Replace atomically, as config writers should.
					tmp := filepath.Join(dir, "10-a.tmp")
					if err := os.WriteFile(tmp, fmt.Appendf(nil, `{"cniVersion":"1.0.0","name":"net-a","plugins":[{"type":"a%d"}]}`, i), 0o644); err != nil {
						done <- err
						return
					}
					if err := os.Rename(tmp, filepath.Join(dir, "10-a.conflist")); err != nil {
						done <- err
						return
					}
				}
				if _, err := r.Resolve("ns", "net-a", ""); err != nil {
					done <- err
					return
				}
				if _, err := r.Resolve("ns", fmt.Sprintf("spec-%d", i%3), specThickConf); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestResolveWithoutCNIVersionRunsAsLibcni: a config that declares no
// cniVersion is not refused; it resolves to a list in ImpliedCNIVersion with a
// warning naming the field, and every plugin reads the same version from its
// stdin as when libcni runs the original config (CNI 0.1.0).
func TestResolveWithoutCNIVersionRunsAsLibcni(t *testing.T) {
	for _, tt := range []struct{ name, config string }{
		{"single config without cniVersion", `{"name":"nad1","type":"a","mtu":1400}`},
		{"single config with empty cniVersion", `{"cniVersion":"","name":"nad1","type":"a"}`},
		{"single config with null cniVersion", `{"cniVersion":null,"name":"nad1","type":"a"}`},
		{"single config without cniVersion nor name", `{"type":"a"}`},
		{"list without cniVersion", `{"name":"nad1","plugins":[{"type":"a"},{"type":"b","cniVersion":"1.0.0"}]}`},
		{"list with empty cniVersion", `{"cniVersion":"","name":"nad1","plugins":[{"type":"a"}]}`},
		{"list without cniVersion nor name", `{"plugins":[{"type":"a"}]}`},
		{"list with only cniVersions newer than libcni", `{"cniVersions":["9.0.0"],"name":"nad1","plugins":[{"type":"a"}]}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l, warnings, err := ResolveSpecConfig("ns1", "nad1", tt.config)
			if err != nil {
				t.Fatalf("ResolveSpecConfig: %v", err)
			}
			if l.CNIVersion != ImpliedCNIVersion || l.Name != "nad1" {
				t.Errorf("name/cniVersion = %q/%q, want nad1/%q", l.Name, l.CNIVersion, ImpliedCNIVersion)
			}
			assertSelfContained(t, l)
			if len(warnings) != 1 || warnings[0].Field != "cniVersion" || !strings.Contains(warnings[0].Error(), "NetworkAttachmentDefinition ns1/nad1: spec.config: field cniVersion: missing") || !strings.Contains(warnings[0].Error(), ImpliedCNIVersion) {
				t.Errorf("warnings = %v, want one for field cniVersion", warnings)
			}
			if l2, err := Resolve("ns1", "nad1", tt.config, nil); err != nil || string(l2.Bytes) != string(l.Bytes) {
				t.Errorf("Resolve = %v, %v; want the list of ResolveSpecConfig", l2, err)
			}
			got := pluginVersions(t, l)
			if !strings.Contains(tt.config, `"name"`) {
				return
			}
			// libcni on the original config: a list as it is, a single config
			// as a runtime loads a .conf file (LoadNetworkConf converts it to
			// a one-plugin list).
			orig, err := libcni.NetworkConfFromBytes([]byte(tt.config))
			if !strings.Contains(tt.config, `"plugins"`) {
				dir := t.TempDir()
				writeFile(t, dir, "10-nad1.conf", tt.config)
				orig, err = libcni.LoadNetworkConf(dir, "nad1")
			}
			if err != nil {
				t.Fatalf("libcni refuses the original config: %v", err)
			}
			if want := pluginVersions(t, orig); !reflect.DeepEqual(got, want) {
				t.Errorf("plugins read cniVersion %v, libcni's run of the original config %v", got, want)
			}
		})
	}
	// A declared version gives no warning.
	if _, warnings, err := ResolveSpecConfig("ns1", "nad1", `{"cniVersion":"1.0.0","type":"a"}`); err != nil || len(warnings) != 0 {
		t.Errorf("declared cniVersion: warnings %v, error %v", warnings, err)
	}
}

// pluginVersions runs ADD of l through libcni and returns the CNI version each
// plugin reads from its stdin (create.DecodeVersion, which skel uses).
func pluginVersions(t *testing.T, l *libcni.NetworkConfigList) []string {
	t.Helper()
	ex := &recordingExec{}
	cni := libcni.NewCNIConfigWithCacheDir([]string{"/opt/cni/bin"}, t.TempDir(), ex)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cni.AddNetworkList(ctx, l, &libcni.RuntimeConf{ContainerID: "c0ffee", NetNS: "/var/run/netns/x", IfName: "net1"}); err != nil {
		t.Fatalf("libcni ADD: %v", err)
	}
	var vs []string
	for _, c := range ex.calls {
		b, err := json.Marshal(c.stdin)
		if err != nil {
			t.Fatal(err)
		}
		v, err := create.DecodeVersion(b)
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	return vs
}
