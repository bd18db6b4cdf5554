package attach

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/internal/devices/draclaims"
	"github.com/multinet/multinet/internal/node/cniserver/api"
	"github.com/multinet/multinet/internal/testing/cnitest"
	"github.com/multinet/multinet/pkg/spec/devinfo"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
)

// fakeClaims is a ClaimDevices over a map pod claim → device, recording
// the status writes (the real one is tested against an API server in
// internal/devices/draclaims).
type fakeClaims struct {
	mu      sync.Mutex
	devices map[string]*draclaims.Device
	err     error
	writes  []string // "ready <device> <ifName> <ips> <mac>", "failed <device> <msg>", "clear <device>"
	// podDevices is what PodDevices returns (of the resources wanted);
	// each call is recorded in writes as "pod want=<r,…> skip=<c,…>".
	podDevices map[string][]*draclaims.Device
}

func (f *fakeClaims) PodDevices(_ context.Context, _ *corev1.Pod, want, skip map[string]bool) (map[string][]*draclaims.Device, error) {
	keys := func(m map[string]bool) string {
		var k []string
		for x, ok := range m {
			if ok {
				k = append(k, x)
			}
		}
		sort.Strings(k)
		return strings.Join(k, ",")
	}
	f.record("pod want=" + keys(want) + " skip=" + keys(skip))
	out := map[string][]*draclaims.Device{}
	for r, ds := range f.podDevices {
		if want[r] {
			out[r] = ds
		}
	}
	return out, nil
}

func (f *fakeClaims) Device(_ context.Context, _ *corev1.Pod, podClaim, resourceName string) (*draclaims.Device, error) {
	if f.err != nil {
		return nil, f.err
	}
	d, ok := f.devices[podClaim]
	if !ok || d.ResourceName != resourceName {
		return nil, errors.New("no such claim device")
	}
	return d, nil
}

func (f *fakeClaims) record(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, s)
}

func (f *fakeClaims) SetReady(_ context.Context, d *draclaims.Device, nd *resourceapi.NetworkDeviceData, _ string) error {
	f.record("ready " + d.Name + " " + nd.InterfaceName + " " + strings.Join(nd.IPs, ",") + " " + nd.HardwareAddress)
	return nil
}

func (f *fakeClaims) SetFailed(_ context.Context, d *draclaims.Device, msg string) error {
	f.record("failed " + d.Name + " " + msg)
	return nil
}

func (f *fakeClaims) Clear(_ context.Context, d *draclaims.Device) error {
	f.record("clear " + d.Name)
	return nil
}

// draEnv: deviceEnv plus NAD ns1/dra-net naming a ResourceClaimTemplate,
// whose pod claim multinet-net-1 holds device "dev-a" (ID 0000:00:09.0).
func draEnv(t *testing.T, claims *fakeClaims) *deviceEnv {
	t.Helper()
	d := newDeviceEnv(t)
	d.eng.opts.Claims = claims
	d.nads.put(podNS, "dra-net", `{"cniVersion":"1.0.0","name":"dra-net","plugins":[{"type":"mnu-echo","capabilities":{"deviceID":true,"CNIDeviceInfoFile":true}}]}`,
		map[string]string{nadv1.ResourceNameAnnotation: "example.com/dra", podnetworks.ResourceClaimTemplateAnnotation: "tmpl"})
	return d
}

// A DRA attachment gets its claim's device exactly as a device plugin's:
// runtimeConfig deviceID, the device plugin device-info copied to the CNI
// file and published in network-status, the device (and claim) in the
// record; the claim gets Ready with networkData; DEL clears it.
func TestAddDRANetwork(t *testing.T) {
	dev := &draclaims.Device{Namespace: podNS, Claim: "p-multinet-net-1-x", ClaimUID: "u", Driver: "dra.multinet.io", Pool: "n/example.com/dra",
		Name: "0000-00-09-0", ResourceName: "example.com/dra", DeviceID: "0000:00:09.0"}
	claims := &fakeClaims{devices: map[string]*draclaims.Device{"multinet-net-1": dev}}
	d := draEnv(t, claims)
	info := &devinfo.DeviceInfo{Type: devinfo.TypePCI, Version: devinfo.SpecVersion, PCI: &devinfo.PCI{PCIAddress: dev.DeviceID}}
	if _, err := d.devinfo.WriteDP("example.com/dra", dev.DeviceID, info); err != nil {
		t.Fatal(err)
	}
	pod := d.podWithNetworks("dra-net")
	id := "ctr-" + cnitest.UniqueName("")
	d.add(id, pod)
	if rc := d.runtimeConfig("ADD", "net1"); rc["deviceID"] != dev.DeviceID {
		t.Errorf("runtimeConfig deviceID = %q, want %q", rc["deviceID"], dev.DeviceID)
	}
	want, _ := info.Encode()
	for _, s := range d.networkStatus(pod) {
		if s.Interface == "net1" && !jsonEqual(t, s.DeviceInfo, want) {
			t.Errorf("network-status net1 device-info = %s, want %s", s.DeviceInfo, want)
		}
	}
	rec, err := d.store.Load(id)
	if err != nil {
		t.Fatal(err)
	}
	a := rec.Attachments[1]
	if a.DeviceID != dev.DeviceID || a.Claim == nil || a.Claim.Name != dev.Claim || a.Claim.Device != dev.Name {
		t.Errorf("record: deviceID %q claim %+v", a.DeviceID, a.Claim)
	}
	if len(claims.writes) != 1 || !strings.HasPrefix(claims.writes[0], "ready 0000-00-09-0 net1 ") {
		t.Errorf("claim writes after ADD = %q, want ready with net1", claims.writes)
	}
	d.del(id, pod)
	if n := len(claims.writes); n != 2 || claims.writes[1] != "clear 0000-00-09-0" {
		t.Errorf("claim writes after DEL = %q, want the status cleared", claims.writes)
	}
}

// Fail closed: when the claim's device cannot be found the ADD fails (try
// again later) and no delegate runs; when the delegate fails, the claim
// gets Ready=False with the reason.
func TestAddDRANetworkFailsClosed(t *testing.T) {
	claims := &fakeClaims{err: errors.New("ResourceClaim ns1/x is not allocated")}
	d := draEnv(t, claims)
	pod := d.podWithNetworks("dra-net")
	_, err := d.eng.Add(context.Background(), d.req(api.CmdAdd, "ctr-"+cnitest.UniqueName(""), pod))
	if err == nil || !strings.Contains(err.Error(), "its DRA device: ResourceClaim ns1/x is not allocated") {
		t.Fatalf("ADD = %v, want the claim error", err)
	}

	dev := &draclaims.Device{Name: "dev-b", ResourceName: "example.com/dra", DeviceID: "eth9"}
	claims = &fakeClaims{devices: map[string]*draclaims.Device{"multinet-net-1": dev}}
	d = draEnv(t, claims)
	d.nads.put(podNS, "dra-net", `{"cniVersion":"1.0.0","name":"dra-net","plugins":[{"type":"mnu-no-such-plugin","capabilities":{"deviceID":true}}]}`,
		map[string]string{nadv1.ResourceNameAnnotation: "example.com/dra", podnetworks.ResourceClaimTemplateAnnotation: "tmpl"})
	_, err = d.eng.Add(context.Background(), d.req(api.CmdAdd, "ctr-"+cnitest.UniqueName(""), d.podWithNetworks("dra-net")))
	if err == nil {
		t.Fatal("ADD with a missing delegate succeeded")
	}
	if len(claims.writes) != 1 || !strings.HasPrefix(claims.writes[0], "failed dev-b ") || !strings.Contains(claims.writes[0], "mnu-no-such-plugin") {
		t.Errorf("claim writes = %q, want failed with the reason", claims.writes)
	}
}

// ownClaimsEnv: draEnv whose PodResources holds device 0000:00:01.0 of
// devResource, plus NAD ns1/own-net naming resource example.com/dra and no
// template (Multus's DRA flow).
func ownClaimsEnv(t *testing.T, claims *fakeClaims) *deviceEnv {
	d := newDeviceEnv(t, "0000:00:01.0")
	d.eng.opts.Claims = claims
	d.nads.put(podNS, "dra-net", `{"cniVersion":"1.0.0","name":"dra-net","plugins":[{"type":"mnu-echo","capabilities":{"deviceID":true}}]}`,
		map[string]string{nadv1.ResourceNameAnnotation: "example.com/dra", podnetworks.ResourceClaimTemplateAnnotation: "tmpl"})
	d.nads.put(podNS, "own-net", `{"cniVersion":"1.0.0","name":"own-net","plugins":[{"type":"mnu-echo","capabilities":{"deviceID":true}}]}`,
		map[string]string{nadv1.ResourceNameAnnotation: "example.com/dra"})
	return d
}

// podWithClaims registers a pod selecting networks with the pod claims
// named (each from template "t").
func (d *deviceEnv) podWithClaims(networks string, claims ...string) *corev1.Pod {
	p := d.podWithNetworks(networks)
	for _, c := range claims {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: c, ResourceClaimTemplateName: &c})
	}
	return p
}

// Multus's DRA flow: attachments to a NAD with a resourceName and no
// template get the devices of that resource in the pod's own claims, in
// device-ID order (two attachments, two distinct devices), next to a
// template network that keeps its own claim (skipped in the lookup); each
// device gets its KEP-4817 status, cleared on DEL. PodResources is not
// consulted for them.
func TestAddDRAPodOwnClaims(t *testing.T) {
	devA := &draclaims.Device{Claim: "p-vf", Name: "net-a", ResourceName: "example.com/dra", DeviceID: "a"}
	devB := &draclaims.Device{Claim: "p-vf", Name: "net-b", ResourceName: "example.com/dra", DeviceID: "b"}
	devT := &draclaims.Device{Claim: "p-mn1", Name: "net-t", ResourceName: "example.com/dra", DeviceID: "t"}
	claims := &fakeClaims{devices: map[string]*draclaims.Device{"multinet-net-1": devT},
		podDevices: map[string][]*draclaims.Device{"example.com/dra": {devA, devB}}}
	d := ownClaimsEnv(t, claims)
	pod := d.podWithClaims("own-net,own-net,dra-net", "vf", "gpu", "multinet-net-1")
	id := "ctr-" + cnitest.UniqueName("")
	d.add(id, pod)
	for ifName, want := range map[string]string{"net1": "a", "net2": "b", "net3": "t"} {
		if rc := d.runtimeConfig("ADD", ifName); rc["deviceID"] != want {
			t.Errorf("%s: runtimeConfig deviceID = %q, want %q", ifName, rc["deviceID"], want)
		}
	}
	want := []string{"pod want=example.com/dra skip=multinet-net-1", "ready net-a net1 ", "ready net-b net2 ", "ready net-t net3 "}
	if len(claims.writes) != len(want) {
		t.Fatalf("claim calls = %q, want %q", claims.writes, want)
	}
	for i, w := range want {
		if !strings.HasPrefix(claims.writes[i], w) {
			t.Errorf("claim call %d = %q, want %q…", i, claims.writes[i], w)
		}
	}
	claims.writes = nil
	d.del(id, pod)
	if strings.Join(claims.writes, ";") != "clear net-a;clear net-b;clear net-t" && strings.Join(claims.writes, ";") != "clear net-t;clear net-b;clear net-a" {
		t.Errorf("claim writes after DEL = %q, want the three cleared", claims.writes)
	}
}

// The pod's claims decide only for the resources they hold: without own
// claims nothing is read, and a resource they hold no device of comes from
// PodResources (the device plugin); more attachments than the claims'
// devices fail the ADD.
func TestAddDRAPodOwnClaimsFallbacks(t *testing.T) {
	claims := &fakeClaims{podDevices: map[string][]*draclaims.Device{"example.com/dra": {{Name: "net-a", ResourceName: "example.com/dra", DeviceID: "a"}}}}
	d := ownClaimsEnv(t, claims)
	d.add("ctr-"+cnitest.UniqueName(""), d.podWithNetworks("dev-net"))
	if len(claims.writes) != 0 {
		t.Errorf("a pod without claims: claim calls %q", claims.writes)
	}
	claims = &fakeClaims{podDevices: claims.podDevices}
	d = ownClaimsEnv(t, claims)
	d.add("ctr-"+cnitest.UniqueName(""), d.podWithClaims("dev-net", "gpu"))
	if rc := d.runtimeConfig("ADD", "net1"); rc["deviceID"] != "0000:00:01.0" {
		t.Errorf("device-plugin resource next to a GPU claim: deviceID %q, want PodResources' 0000:00:01.0", rc["deviceID"])
	}
	_, err := d.eng.Add(context.Background(), d.req(api.CmdAdd, "ctr-"+cnitest.UniqueName(""), d.podWithClaims("own-net,own-net", "vf")))
	if err == nil || !strings.Contains(err.Error(), "network ns1/own-net needs device 2 of resource example.com/dra, but the pod's resource claims hold 1 of it") {
		t.Errorf("two attachments, one device: %v", err)
	}
}
