package podnetworks

import (
	"slices"
	"strings"
	"testing"

	"github.com/multinet/multinet/pkg/spec/selection"
)

// multus-dynamic-networks-controller's e2e NAD macvlanNetworkWitStaticIPAM
// (only "ips" declared) and Multus's default-route1 template (none).
const (
	dncIPAMConf   = `{"cniVersion":"0.3.0","disableCheck":true,"name":"tenant-network-ipam","plugins":[{"type":"macvlan","capabilities":{"ips":true},"master":"eth0","mode":"bridge","ipam":{"type":"static"}},{"type":"tuning"}]}`
	defRoute1Conf = `{"cniVersion":"0.4.0","plugins":[{"type":"macvlan","master":"eth1","mode":"bridge","ipam":{"type":"static"}}]}`
)

// undeclaredPod selects both with the keys the peers' e2e suites ask for.
const undeclaredPod = `[{"name":"tenant-network-ipam","ips":["10.10.10.111/24"],"interface":"ens202","mac":"02:03:04:05:06:07"},` +
	`{"name":"default-route-config","ips":["10.1.1.21/24"],"default-route":["10.1.1.254"]}]`

// TestCheckUndeclaredCapabilities: the one setting. Refused by default and
// with "refuse", each problem naming the key and the spec section; handed
// over with "multus": the verdict is valid, the attachments carry the
// CNI_ARGS Multus sets, and Verdict.Undeclared names each NAD and missing
// capability in both modes (lint's list, multinetd's Warning Event).
func TestCheckUndeclaredCapabilities(t *testing.T) {
	s := source(nad("ns1", "tenant-network-ipam", dncIPAMConf, nil), nad("ns1", "default-route-config", defRoute1Conf, nil))
	wantUses := []string{
		`metadata.annotations["k8s.v1.cni.cncf.io/networks"]: networks[0] "tenant-network-ipam" ns1/tenant-network-ipam "mac"`,
		`metadata.annotations["k8s.v1.cni.cncf.io/networks"]: networks[1] "default-route-config" ns1/default-route-config "ips"`,
	}
	for _, mode := range []UndeclaredCapabilities{"", RefuseUndeclared} {
		v := check(t, networks(undeclaredPod), s, Options{Policy: Policy{UndeclaredCapabilities: mode}})
		got := problems(v)
		if len(got) != 2 || !strings.Contains(got[0], `field "mac": needs runtimeConfig "mac"`) || !strings.Contains(got[0], "(spec §4.1.2.1.4.2)") ||
			!strings.Contains(got[1], `field "ips": needs runtimeConfig "ips"`) || !strings.Contains(got[1], "(spec §4.1.2.1.3.2)") {
			t.Errorf("mode %q: problems %q, want the mac (§4.1.2.1.4.2) and ips (§4.1.2.1.3.2) refusals", mode, got)
		}
		if u := uses(v); !slices.Equal(u, wantUses) {
			t.Errorf("mode %q: Undeclared\n got %q\nwant %q", mode, u, wantUses)
		}
	}

	v := check(t, networks(undeclaredPod), s, Options{Policy: Policy{UndeclaredCapabilities: MultusUndeclared}})
	if len(v.Problems) != 0 {
		t.Fatalf("multus: problems %q, want none", problems(v))
	}
	if u := uses(v); !slices.Equal(u, wantUses) {
		t.Errorf("multus: Undeclared\n got %q\nwant %q", u, wantUses)
	}
	want := [][][2]string{{{"MAC", "02:03:04:05:06:07"}}, {{"IP", "10.1.1.21/24"}}}
	for i, a := range v.Attachments {
		if !a.Planned || !slices.Equal(a.CNIArgs, want[i]) {
			t.Errorf("attachment %d: planned %v, CNI args %q, want %q", i, a.Planned, a.CNIArgs, want[i])
		}
	}
	msg := v.Undeclared()[0].Message()
	for _, part := range []string{"ns1/tenant-network-ipam", `declares no capability "mac"`, "§4.1.2.1.4.2", "CNI_ARGS MAC=", "undeclaredCapabilities: multus"} {
		if !strings.Contains(msg, part) {
			t.Errorf("message %q lacks %q", msg, part)
		}
	}
}

// uses renders Verdict.Undeclared as "field NAD capabilities".
func uses(v *Verdict) []string {
	var out []string
	for _, u := range v.Undeclared() {
		out = append(out, u.Field+" "+u.NAD+" "+u.Capabilities())
	}
	return out
}

// TestCheckUndeclaredOverride: the default-network override is handed over
// the same way.
func TestCheckUndeclaredOverride(t *testing.T) {
	s := source(nad("ns1", "default-route-config", defRoute1Conf, nil))
	ann := map[string]string{selection.DefaultNetworkAnnotation: `[{"name":"default-route-config","ips":["10.1.1.21/24"]}]`}
	v := check(t, ann, s, Options{Policy: Policy{UndeclaredCapabilities: MultusUndeclared}})
	if len(v.Problems) != 0 || v.DefaultNetwork == nil || !slices.Equal(v.DefaultNetwork.CNIArgs, [][2]string{{"IP", "10.1.1.21/24"}}) {
		t.Fatalf("problems %q, override %+v", problems(v), v.DefaultNetwork)
	}
	if u := uses(v); len(u) != 1 || !strings.HasPrefix(u[0], `metadata.annotations["v1.multus-cni.io/default-network"]: default-network[0]`) {
		t.Errorf("Undeclared %q", u)
	}
}

func TestParseUndeclaredCapabilities(t *testing.T) {
	for in, want := range map[string]UndeclaredCapabilities{"": RefuseUndeclared, "refuse": RefuseUndeclared, "multus": MultusUndeclared} {
		if got, err := ParseUndeclaredCapabilities(in); err != nil || got != want {
			t.Errorf("ParseUndeclaredCapabilities(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseUndeclaredCapabilities("Multus"); err == nil || !strings.Contains(err.Error(), `"refuse"`) {
		t.Errorf("ParseUndeclaredCapabilities(Multus): %v, want an error naming the values", err)
	}
}
