package netconf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/multinet/multinet/internal/node/cnirequest"
	"github.com/multinet/multinet/pkg/spec/selection"
)

func mustResolve(t testing.TB, name, config string) *libcni.NetworkConfigList {
	t.Helper()
	l, err := Resolve("ns1", name, config, nil)
	if err != nil {
		t.Fatalf("Resolve(%s): %v", name, err)
	}
	return l
}

// capsList is a configlist whose first plugin declares caps and whose second
// declares none.
func capsList(t testing.TB, name string, caps ...string) *libcni.NetworkConfigList {
	t.Helper()
	c := map[string]bool{}
	for _, k := range caps {
		c[k] = true
	}
	cb, _ := json.Marshal(c)
	return mustResolve(t, name, fmt.Sprintf(`{"cniVersion":"1.0.0","name":%q,"plugins":[{"type":"main","capabilities":%s},{"type":"tuning"}]}`, name, cb))
}

func TestPlanInterfaceNames(t *testing.T) {
	l := capsList(t, "net")
	el := func(name, iface string) Network {
		return Network{Element: selection.Element{Namespace: "ns1", Name: name, InterfaceRequest: iface}, ConfList: l}
	}
	tests := []struct {
		name    string
		nets    []Network
		opts    PlanOptions
		want    []string
		wantErr string
	}{
		{name: "§4.2.1 generated net1, net2, … in order", nets: []Network{el("a", ""), el("b", ""), el("c", "")},
			opts: PlanOptions{DefaultIfName: "eth0"}, want: []string{"net1", "net2", "net3"}},
		{name: "§4.2 same network twice gets two interfaces", nets: []Network{el("a", ""), el("a", "")},
			opts: PlanOptions{DefaultIfName: "eth0"}, want: []string{"net1", "net2"}},
		{name: "generated names skip names any element requests, even a later one", nets: []Network{el("a", ""), el("b", "net1"), el("c", ""), el("d", "eth1")},
			opts: PlanOptions{DefaultIfName: "eth0"}, want: []string{"net2", "net1", "net3", "eth1"}},
		{name: "generated names skip the default network's name", nets: []Network{el("a", ""), el("b", "")},
			opts: PlanOptions{DefaultIfName: "net1"}, want: []string{"net2", "net3"}},
		{name: "generated names skip reserved names (multinetd's defaultNetworks)", nets: []Network{el("a", ""), el("b", "")},
			opts: PlanOptions{DefaultIfName: "eth0", Reserved: map[string]string{"net1": "x", "net2": "y"}}, want: []string{"net3", "net4"}},
		{name: "a reserved interface cannot be requested", nets: []Network{el("a", "net1")},
			opts:    PlanOptions{DefaultIfName: "eth0", Reserved: map[string]string{"net1": `network "kube-system/side" of defaultNetworks`}},
			wantErr: `network "ns1/a" (selection element 0): interface "net1" is used by network "kube-system/side" of defaultNetworks`},
		{name: "§4.1.2.1.5 an interface requested twice fails", nets: []Network{el("a", "data0"), el("b", "data0")},
			opts: PlanOptions{DefaultIfName: "eth0"}, wantErr: `network "ns1/b" (selection element 1): interface "data0" is used by network "ns1/a" (selection element 0)`},
		{name: "§4.1.2.1.5 the default network's interface cannot be requested", nets: []Network{el("a", "eth0")},
			opts: PlanOptions{DefaultIfName: "eth0"}, wantErr: `interface "eth0" is used by the default network`},
		{name: "an invalid interface name fails", nets: []Network{el("a", "a/b")}, wantErr: `interface "a/b"`},
		{name: "a too long interface name fails", nets: []Network{el("a", "abcdefghijklmnop")}, wantErr: `too long`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			atts, err := Plan(tt.nets, tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for i, a := range atts {
				got = append(got, a.IfName)
				if a.Index != i || a.NetworkKey != "ns1/"+tt.nets[i].Element.Name || a.NetworkName != "net" {
					t.Errorf("attachment %d: index %d key %q network %q", i, a.Index, a.NetworkKey, a.NetworkName)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ifnames = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPlanCapabilities(t *testing.T) {
	tests := []struct {
		name    string
		section string
		element selection.Element
		key     string // runtimeConfig key
		want    any    // CapabilityArgs[key] when declared
		fails   bool   // whether the absence of the capability fails the attachment
	}{
		{name: "ips", section: "§4.1.2.1.3.2", element: selection.Element{IPRequest: []string{"10.2.2.42/24", "2001:db8::5/64"}},
			key: "ips", want: []string{"10.2.2.42/24", "2001:db8::5/64"}, fails: true},
		{name: "mac", section: "§4.1.2.1.4.2", element: selection.Element{MacRequest: "c2:b0:57:49:47:f1"},
			key: "mac", want: "c2:b0:57:49:47:f1", fails: true},
		{name: "portMappings, protocol lower-cased and defaulted", section: "§4.1.2.1.7.2", element: selection.Element{PortMappingsRequest: []selection.PortMapping{
			{HostPort: 8080, ContainerPort: 80, Protocol: "TCP"}, {HostPort: 8000, ContainerPort: 8001, Protocol: "udp", HostIP: "127.0.0.1"}, {HostPort: 9, ContainerPort: 9}}},
			key: "portMappings", want: []PortMapping{{8080, 80, "tcp", ""}, {8000, 8001, "udp", "127.0.0.1"}, {9, 9, "tcp", ""}}, fails: true},
		{name: "bandwidth, bursts defaulted when only rates are set", section: "§4.1.2.1.8.2", element: selection.Element{BandwidthRequest: &selection.Bandwidth{IngressRate: 2048, EgressRate: 1024, EgressBurst: 512}},
			key: "bandwidth", want: BandwidthEntry{IngressRate: 2048, IngressBurst: DefaultBurst, EgressRate: 1024, EgressBurst: 512}, fails: true},
		{name: "infiniband-guid", section: "§4.1.2.1.10.2", element: selection.Element{InfinibandGUIDRequest: "24:8a:07:03:00:8d:ae:2f"},
			key: "infinibandGUID", want: "24:8a:07:03:00:8d:ae:2f", fails: true},
		{name: "ipam-claim-reference is optional", section: "§4.1.2.1.11", element: selection.Element{IPAMClaimReference: "claim-1"},
			key: "ipamClaimReference", want: "claim-1", fails: false},
	}
	for _, tt := range tests {
		t.Run(tt.section+" "+tt.name+" declared", func(t *testing.T) {
			e := tt.element
			e.Namespace, e.Name = "ns1", "net-b"
			atts, err := Plan([]Network{{Element: e, ConfList: capsList(t, "net-b", tt.key)}}, PlanOptions{DefaultIfName: "eth0"})
			if err != nil {
				t.Fatal(err)
			}
			if got := atts[0].CapabilityArgs; len(got) != 1 || !reflect.DeepEqual(got[tt.key], tt.want) {
				t.Errorf("CapabilityArgs = %#v, want only %s=%#v", got, tt.key, tt.want)
			}
		})
		t.Run(tt.section+" "+tt.name+" not declared", func(t *testing.T) {
			e := tt.element
			e.Namespace, e.Name = "ns1", "net-b"
			// A capability declared false counts as not declared.
			l := mustResolve(t, "net-b", fmt.Sprintf(`{"cniVersion":"1.0.0","name":"net-b","plugins":[{"type":"main","capabilities":{%q:false,"other":true}}]}`, tt.key))
			atts, err := Plan([]Network{{Element: e, ConfList: l}}, PlanOptions{})
			if !tt.fails {
				if err != nil || atts[0].CapabilityArgs != nil {
					t.Fatalf("Plan = %v, %v; want success without CapabilityArgs", atts, err)
				}
				return
			}
			if !errors.Is(err, ErrNoCapability) {
				t.Fatalf("error = %v, want ErrNoCapability", err)
			}
			for _, s := range []string{`network "ns1/net-b"`, fmt.Sprintf("%q: true", tt.key), tt.section} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %s", err, s)
				}
			}
		})
	}

	t.Run("no request, no runtimeConfig", func(t *testing.T) {
		atts, err := Plan([]Network{{Element: selection.Element{Name: "n"}, ConfList: capsList(t, "n", "ips", "mac", "portMappings")}}, PlanOptions{})
		if err != nil || atts[0].CapabilityArgs != nil {
			t.Fatalf("Plan = %+v, %v", atts, err)
		}
	})
	t.Run("element values are copied, not shared", func(t *testing.T) {
		e := selection.Element{Name: "n", IPRequest: []string{"10.0.0.1/24"}}
		atts, err := Plan([]Network{{Element: e, ConfList: capsList(t, "n", "ips")}}, PlanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		e.IPRequest[0] = "changed"
		if got := atts[0].CapabilityArgs["ips"].([]string)[0]; got != "10.0.0.1/24" {
			t.Errorf("CapabilityArgs ips follows the element: %q", got)
		}
	})
}

func pluginArgs(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var c struct {
		Args map[string]any `json:"args"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c.Args
}

func TestPlanCNIArgs(t *testing.T) {
	// §4.1.2.1.6.2: the annotation's cni-args win over the config's args.cni.
	cfg := `{"cniVersion":"1.0.0","name":"net-c","plugins":[
		{"type":"main","args":{"cni":{"a":"conf","b":"conf"},"labels":["x"]}},
		{"type":"second"},
		{"type":"third","args":{"cni":null}}]}`
	l := mustResolve(t, "net-c", cfg)
	before := string(l.Bytes)
	e := selection.Element{Namespace: "ns1", Name: "net-c", CNIArgs: map[string]any{"b": "annotation", "c": float64(3), "d": map[string]any{"x": true}}}
	atts, err := Plan([]Network{{Element: e, ConfList: l}}, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := atts[0].ConfList
	want := []map[string]any{
		{"cni": map[string]any{"a": "conf", "b": "annotation", "c": float64(3), "d": map[string]any{"x": true}}, "labels": []any{"x"}},
		{"cni": map[string]any{"b": "annotation", "c": float64(3), "d": map[string]any{"x": true}}},
		{"cni": map[string]any{"b": "annotation", "c": float64(3), "d": map[string]any{"x": true}}},
	}
	for i, p := range got.Plugins {
		if a := pluginArgs(t, p.Bytes); !reflect.DeepEqual(a, want[i]) {
			t.Errorf("plugins[%d].args = %v, want %v", i, a, want[i])
		}
	}
	assertSelfContained(t, got)
	if string(l.Bytes) != before || pluginArgs(t, l.Plugins[1].Bytes) != nil {
		t.Error("Plan modified the resolved (shared) list")
	}

	t.Run("no cni-args leaves the list as resolved", func(t *testing.T) {
		atts, err := Plan([]Network{{Element: selection.Element{Name: "net-c"}, ConfList: l}}, PlanOptions{})
		if err != nil || atts[0].ConfList != l {
			t.Fatalf("Plan = %v, %v; want the same list", atts, err)
		}
	})
	for _, bad := range []string{`"args":"str"`, `"args":{"cni":[1]}`} {
		t.Run("config args not an object: "+bad, func(t *testing.T) {
			l := mustResolve(t, "n", `{"cniVersion":"1.0.0","name":"n","type":"main",`+bad+`}`)
			_, err := Plan([]Network{{Element: selection.Element{Namespace: "ns1", Name: "n", CNIArgs: map[string]any{"a": 1}}, ConfList: l}}, PlanOptions{})
			if err == nil || !strings.Contains(err.Error(), `network "ns1/n"`) || !strings.Contains(err.Error(), "plugins[0].args") {
				t.Fatalf("error = %v, want one naming the network and plugins[0].args", err)
			}
		})
	}
}

// recordingExec is libcni's invoke.Exec that records what libcni would send
// each plugin on stdin, and answers with an empty result of the right version.
type recordingExec struct {
	mu    sync.Mutex
	calls []recordedCall
}

type recordedCall struct {
	plugin  string
	command string
	ifName  string
	cniArgs string // CNI_ARGS
	stdin   map[string]any
}

func (r *recordingExec) ExecPlugin(_ context.Context, pluginPath string, stdin []byte, environ []string) ([]byte, error) {
	c := recordedCall{plugin: pluginPath}
	if err := json.Unmarshal(stdin, &c.stdin); err != nil {
		return nil, err
	}
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "CNI_COMMAND="); ok {
			c.command = v
		}
		if v, ok := strings.CutPrefix(kv, "CNI_IFNAME="); ok {
			c.ifName = v
		}
		if v, ok := strings.CutPrefix(kv, "CNI_ARGS="); ok {
			c.cniArgs = v
		}
	}
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	if c.command != "ADD" {
		return nil, nil
	}
	return fmt.Appendf(nil, `{"cniVersion":%q}`, c.stdin["cniVersion"]), nil
}

func (r *recordingExec) FindInPath(plugin string, _ []string) (string, error) {
	return "/opt/cni/bin/" + plugin, nil
}

func (r *recordingExec) Decode(b []byte) (version.PluginInfo, error) {
	return (&version.PluginDecoder{}).Decode(b)
}

func runAdd(t *testing.T, a *Attachment) []recordedCall {
	t.Helper()
	ex := &recordingExec{}
	cni := libcni.NewCNIConfigWithCacheDir([]string{"/opt/cni/bin"}, t.TempDir(), ex)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cni.AddNetworkList(ctx, a.ConfList, a.RuntimeConf("c0ffee", "/var/run/netns/x", [][2]string{{"K8S_POD_NAMESPACE", "ns1"}})); err != nil {
		t.Fatalf("libcni ADD: %v", err)
	}
	return ex.calls
}

// TestLibcniInvocation runs planned attachments through the real libcni and
// checks the JSON each plugin would receive: §7.1 name and cniVersion in every
// plugin, runtimeConfig only where declared, args.cni everywhere.
func TestLibcniInvocation(t *testing.T) {
	l := mustResolve(t, "net-b", `{"cniVersion":"1.0.0","name":"net-b","plugins":[
		{"type":"macvlan","cniVersion":"0.3.1","capabilities":{"ips":true,"mac":true}},
		{"type":"portmap","name":"other","capabilities":{"portMappings":true}},
		{"type":"tuning"}]}`)
	e := selection.Element{Namespace: "ns1", Name: "net-b", IPRequest: []string{"10.2.2.42/24"}, MacRequest: "c2:b0:57:49:47:f1",
		PortMappingsRequest: []selection.PortMapping{{HostPort: 8080, ContainerPort: 80}}, CNIArgs: map[string]any{"k": "v"}}
	atts, err := Plan([]Network{{Element: e, ConfList: l}}, PlanOptions{DefaultIfName: "eth0"})
	if err != nil {
		t.Fatal(err)
	}
	calls := runAdd(t, &atts[0])
	if len(calls) != 3 {
		t.Fatalf("libcni ran %d plugins, want 3", len(calls))
	}
	wantRC := []map[string]any{
		{"ips": []any{"10.2.2.42/24"}, "mac": "c2:b0:57:49:47:f1"},
		{"portMappings": []any{map[string]any{"hostPort": float64(8080), "containerPort": float64(80), "protocol": "tcp"}}},
		nil,
	}
	for i, c := range calls {
		if c.stdin["name"] != "net-b" || c.stdin["cniVersion"] != "1.0.0" {
			t.Errorf("plugin %d got name %v cniVersion %v, want the list's net-b 1.0.0 (§7.1)", i, c.stdin["name"], c.stdin["cniVersion"])
		}
		if c.ifName != "net1" {
			t.Errorf("plugin %d CNI_IFNAME = %q, want net1", i, c.ifName)
		}
		rc, _ := c.stdin["runtimeConfig"].(map[string]any)
		if !reflect.DeepEqual(rc, wantRC[i]) {
			t.Errorf("plugin %d runtimeConfig = %v, want %v", i, rc, wantRC[i])
		}
		if args, _ := c.stdin["args"].(map[string]any); !reflect.DeepEqual(args, map[string]any{"cni": map[string]any{"k": "v"}}) {
			t.Errorf("plugin %d args = %v", i, args)
		}
	}

	// DEL from what internal/node/state records (list bytes + capability args) sends the same.
	re, err := libcni.NetworkConfFromBytes(atts[0].ConfList.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	ex := &recordingExec{}
	cni := libcni.NewCNIConfigWithCacheDir([]string{"/opt/cni/bin"}, t.TempDir(), ex)
	rt := atts[0].RuntimeConf("c0ffee", "", nil)
	if err := cni.DelNetworkList(context.Background(), re, rt); err != nil {
		t.Fatal(err)
	}
	for i, c := range ex.calls { // reverse order
		want := calls[len(calls)-1-i].stdin
		for _, k := range []string{"type", "runtimeConfig", "args", "name", "cniVersion"} {
			if !reflect.DeepEqual(c.stdin[k], want[k]) {
				t.Errorf("DEL plugin %d %s = %v, ADD had %v", i, k, c.stdin[k], want[k])
			}
		}
	}
}

// TestDefaultNetworkRuntimeConfigIsolation: spec §7.5.
func TestDefaultNetworkRuntimeConfigIsolation(t *testing.T) {
	runtimeStdin := []byte(`{"cniVersion":"1.0.0","name":"multinet","type":"multinet-shim",
		"capabilities":{"portMappings":true,"bandwidth":true,"io.kubernetes.cri.pod-annotations":true},
		"runtimeConfig":{"portMappings":[{"hostPort":30080,"containerPort":80,"protocol":"tcp"}],
			"bandwidth":{"ingressRate":1000,"ingressBurst":1000},
			"io.kubernetes.cri.pod-annotations":{"a":"b"}}}`)
	rc, err := cnirequest.RuntimeConfig(runtimeStdin)
	if err != nil || len(rc) != 3 {
		t.Fatalf("cnirequest.RuntimeConfig = %v, %v", rc, err)
	}
	defList := mustResolve(t, "cbr0", `{"cniVersion":"1.0.0","name":"cbr0","plugins":[{"type":"flannel"},{"type":"portmap","capabilities":{"portMappings":true}}]}`)
	def, err := DefaultAttachment("cbr0", defList, "eth0", rc)
	if err != nil {
		t.Fatal(err)
	}
	if len(def.CapabilityArgs) != 1 || def.CapabilityArgs["portMappings"] == nil {
		t.Errorf("default network CapabilityArgs = %v, want only portMappings (the only declared key)", def.CapabilityArgs)
	}
	calls := runAdd(t, &def)
	if _, ok := calls[0].stdin["runtimeConfig"]; ok {
		t.Errorf("flannel got runtimeConfig %v without declaring it", calls[0].stdin["runtimeConfig"])
	}
	if got := calls[1].stdin["runtimeConfig"]; !reflect.DeepEqual(got, map[string]any{"portMappings": rc["portMappings"]}) {
		t.Errorf("portmap runtimeConfig = %v", got)
	}

	// A secondary network whose plugins declare the same capabilities gets none of it.
	secList := capsList(t, "net-b", "portMappings", "bandwidth", "io.kubernetes.cri.pod-annotations")
	atts, err := Plan([]Network{{Element: selection.Element{Namespace: "ns1", Name: "net-b"}, ConfList: secList}}, PlanOptions{DefaultIfName: def.IfName})
	if err != nil {
		t.Fatal(err)
	}
	if atts[0].CapabilityArgs != nil {
		t.Errorf("secondary CapabilityArgs = %v, want none", atts[0].CapabilityArgs)
	}
	for i, c := range runAdd(t, &atts[0]) {
		if v, ok := c.stdin["runtimeConfig"]; ok {
			t.Errorf("secondary plugin %d got runtimeConfig %v", i, v)
		}
	}

	for _, in := range []string{`{"type":"x"}`, `{"runtimeConfig":null}`} {
		if rc, err := cnirequest.RuntimeConfig([]byte(in)); err != nil || rc != nil {
			t.Errorf("cnirequest.RuntimeConfig(%s) = %v, %v; want nil, nil", in, rc, err)
		}
	}
	for _, in := range []string{`[`, `{"runtimeConfig":[1]}`} {
		if _, err := cnirequest.RuntimeConfig([]byte(in)); err == nil {
			t.Errorf("cnirequest.RuntimeConfig(%s) succeeded", in)
		}
	}
	if _, err := DefaultAttachment("cbr0", defList, "", nil); err == nil {
		t.Error("DefaultAttachment with an empty ifname succeeded")
	}
}

func TestSetDevice(t *testing.T) {
	t.Run("deviceID capability goes to runtimeConfig", func(t *testing.T) {
		atts, err := Plan([]Network{{Element: selection.Element{Name: "hd"}, ConfList: capsList(t, "hd", "deviceID")}}, PlanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		a := atts[0]
		shared := a.CapabilityArgs
		if err := a.SetDeviceID("0000:04:00.5"); err != nil {
			t.Fatal(err)
		}
		if a.CapabilityArgs["deviceID"] != "0000:04:00.5" || shared != nil {
			t.Errorf("CapabilityArgs = %v", a.CapabilityArgs)
		}
		calls := runAdd(t, &a)
		if rc := calls[0].stdin["runtimeConfig"]; !reflect.DeepEqual(rc, map[string]any{"deviceID": "0000:04:00.5"}) {
			t.Errorf("runtimeConfig = %v", rc)
		}
	})
	t.Run("no deviceID capability: top-level deviceID of the first plugin", func(t *testing.T) {
		l := mustResolve(t, "sriov", `{"cniVersion":"1.0.0","name":"sriov","plugins":[{"type":"sriov","deviceID":"static"},{"type":"tuning"}]}`)
		before := string(l.Plugins[0].Bytes)
		atts, err := Plan([]Network{{Element: selection.Element{Name: "sriov"}, ConfList: l}}, PlanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		a := atts[0]
		if err := a.SetDeviceID("0000:04:00.5"); err != nil {
			t.Fatal(err)
		}
		if a.CapabilityArgs != nil {
			t.Errorf("CapabilityArgs = %v, want none", a.CapabilityArgs)
		}
		assertSelfContained(t, a.ConfList)
		calls := runAdd(t, &a)
		if calls[0].stdin["deviceID"] != "0000:04:00.5" || calls[1].stdin["deviceID"] != nil {
			t.Errorf("deviceID: plugin 0 %v, plugin 1 %v", calls[0].stdin["deviceID"], calls[1].stdin["deviceID"])
		}
		if string(l.Plugins[0].Bytes) != before {
			t.Error("SetDeviceID modified the shared list")
		}
		if err := a.SetDeviceID(""); err == nil {
			t.Error("SetDeviceID(\"\") succeeded")
		}
	})
	t.Run("CNIDeviceInfoFile only when declared", func(t *testing.T) {
		atts, err := Plan([]Network{
			{Element: selection.Element{Name: "a"}, ConfList: capsList(t, "a", "CNIDeviceInfoFile")},
			{Element: selection.Element{Name: "b"}, ConfList: capsList(t, "b")},
		}, PlanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !atts[0].SetDeviceInfoFile("/var/run/k8s.cni.cncf.io/devinfo/cni/x.json") || atts[0].CapabilityArgs["CNIDeviceInfoFile"] == nil {
			t.Errorf("declared: CapabilityArgs = %v", atts[0].CapabilityArgs)
		}
		if atts[1].SetDeviceInfoFile("/x.json") || atts[1].CapabilityArgs != nil {
			t.Errorf("not declared: CapabilityArgs = %v", atts[1].CapabilityArgs)
		}
	})
}

func TestPlanMissingConfList(t *testing.T) {
	_, err := Plan([]Network{{Element: selection.Element{Namespace: "ns1", Name: "x"}}}, PlanOptions{})
	if err == nil || !strings.Contains(err.Error(), `"ns1/x"`) {
		t.Fatalf("error = %v", err)
	}
}

func TestAppendMember(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{"type":"a"}`, `{"type":"a","args":{"cni":{"k":1}}}`},
		{" \n{\n \"type\": \"a\"\n}\n ", " \n{\n \"type\": \"a\"\n,\"args\":{\"cni\":{\"k\":1}}}"},
		{`{}`, `{"args":{"cni":{"k":1}}}`},
		{`{ }`, `{ "args":{"cni":{"k":1}}}`},
	} {
		got, ok := appendMember([]byte(tt.in), `"args":{"cni":`, []byte(`{"k":1}`), `}`)
		if !ok || string(got) != tt.want || !json.Valid(got) {
			t.Errorf("appendMember(%q) = %q, %v; want %q", tt.in, got, ok, tt.want)
		}
	}
	for _, in := range []string{``, `}`, `[1]`, `"x"`, `{`} {
		if got, ok := appendMember([]byte(in), `"a":`, []byte(`1`), ``); ok {
			t.Errorf("appendMember(%q) = %q, true; want not ok", in, got)
		}
	}
}
