package netconf

import (
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/multinet/multinet/pkg/spec/selection"
)

// FuzzResolve feeds arbitrary bytes as a NAD's spec.config. Resolve must not
// panic, and what it accepts must be runnable: a valid network name, a
// supported cniVersion, every plugin a plain "type", and Bytes that re-parse
// to the same list. Planning it with cni-args must keep that true.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{
		specBridgeConf, specBridgeConfList, specThickConf, benchMacvlan, benchList,
		`{"cniVersions":["0.4.0","1.0.0"],"name":"v","plugins":[{"type":"a","args":{"cni":{"x":1}}}]}`,
		`{"cniVersion":"1.0.0","name":"n","disableCheck":"true","disableGC":true,"plugins":[{"type":"a","capabilities":{"ips":true}}]}`,
		`{"cniVersion":"1.0.0","type":"a","args":null}`,
		`{"cniVersion":"1.0.0","type":"../x"}`,
		`{"cniVersion":"1.0.0","name":"n","plugins":[]}`,
		`{"cniVersion":"1.1.0","name":"n","loadOnlyInlinedPlugins":true}`,
		`{"type":"a"}`, `{"name":"n","plugins":[{"type":"a"}]}`, `{"cniVersion":"","type":"a"}`,
		`null`, `[]`, `{}`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		list, err := Resolve("ns", "nad", string(data), nil)
		if err != nil {
			if !strings.Contains(err.Error(), "ns/nad") {
				t.Fatalf("error %q does not name the NAD", err)
			}
			return
		}
		checkRunnable(t, list)
		// ResolveSpecConfig is the same validator: the same list, and a
		// warning only for a list run in the implied version.
		l2, warnings, err := ResolveSpecConfig("ns", "nad", string(data))
		if err != nil || string(l2.Bytes) != string(list.Bytes) {
			t.Fatalf("ResolveSpecConfig = %v, %v; Resolve gave %s", l2, err, list.Bytes)
		}
		for _, w := range warnings {
			if w.Field != "cniVersion" || list.CNIVersion != ImpliedCNIVersion || !strings.Contains(w.Error(), "ns/nad") {
				t.Fatalf("warning %v on a list in cniVersion %q", w, list.CNIVersion)
			}
		}
		atts, err := Plan([]Network{{Element: selection.Element{Namespace: "ns", Name: "nad", CNIArgs: map[string]any{"k": "v"}}, ConfList: list}}, PlanOptions{DefaultIfName: "eth0"})
		if err != nil {
			// Only a config "args" that is not an object may fail here.
			if !strings.Contains(err.Error(), "args") {
				t.Fatalf("Plan: %v", err)
			}
			return
		}
		checkRunnable(t, atts[0].ConfList)
	})
}

func checkRunnable(t *testing.T, list *libcni.NetworkConfigList) {
	t.Helper()
	if list.Name == "" || !slices.Contains(version.All.SupportedVersions(), list.CNIVersion) || len(list.Plugins) == 0 {
		t.Fatalf("accepted list name %q cniVersion %q with %d plugins", list.Name, list.CNIVersion, len(list.Plugins))
	}
	for i, p := range list.Plugins {
		if err := validatePluginType(p.Network.Type, ShimType); err != nil {
			t.Fatalf("accepted plugins[%d].type %q: %v", i, p.Network.Type, err)
		}
	}
	re, err := libcni.NetworkConfFromBytes(list.Bytes)
	if err != nil {
		t.Fatalf("accepted list bytes do not re-parse: %v\n%s", err, list.Bytes)
	}
	if re.Name != list.Name || re.CNIVersion != list.CNIVersion || len(re.Plugins) != len(list.Plugins) {
		t.Fatalf("re-parsed list differs: %q %q %d vs %q %q %d", re.Name, re.CNIVersion, len(re.Plugins), list.Name, list.CNIVersion, len(list.Plugins))
	}
	for i := range list.Plugins {
		if re.Plugins[i].Network.Type != list.Plugins[i].Network.Type {
			t.Fatalf("re-parsed plugins[%d].type %q vs %q", i, re.Plugins[i].Network.Type, list.Plugins[i].Network.Type)
		}
	}
}
