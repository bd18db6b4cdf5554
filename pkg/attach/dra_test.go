package attach

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/internal/cnitest"
	"github.com/multinet/multinet/pkg/cniserver/api"
	"github.com/multinet/multinet/pkg/devinfo"
	"github.com/multinet/multinet/pkg/draclaims"
	"github.com/multinet/multinet/pkg/podnetworks"
)

// fakeClaims is a ClaimDevices over a map pod claim → device, recording
// the status writes (the real one is tested against an API server in
// pkg/draclaims).
type fakeClaims struct {
	mu      sync.Mutex
	devices map[string]*draclaims.Device
	err     error
	writes  []string // "ready <device> <ifName> <ips> <mac>", "failed <device> <msg>", "clear <device>"
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
