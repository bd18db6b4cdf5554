package attach

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/internal/node/cniserver/api"
	"github.com/multinet/multinet/internal/testing/cnitest"
	"github.com/multinet/multinet/pkg/spec/devinfo"
)

const devResource = "example.com/mnu-dev"

// echoPlugin is a CNI plugin (a shell script) that writes each invocation's
// stdin to <dumpDir>/<command>-<ifname>.json and answers ADD with one
// sandbox interface.
const echoPlugin = `cat > "DUMPDIR/$CNI_COMMAND-$CNI_IFNAME.json"
case "$CNI_COMMAND" in
ADD) printf '{"cniVersion":"1.0.0","interfaces":[{"name":"%s","sandbox":"%s"}],"ips":[]}' "$CNI_IFNAME" "$CNI_NETNS" ;;
VERSION) printf '{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}' ;;
esac
`

// deviceEnv is an env with the echo plugin in BinDirs, a device-info root
// in a temp dir, kubelet allocating ids of devResource, and NAD ns1/dev-net
// (the echo plugin declaring deviceID and CNIDeviceInfoFile) annotated with
// the resource.
type deviceEnv struct {
	*env
	dumpDir string
	devinfo devinfo.Store
}

func newDeviceEnv(t *testing.T, ids ...string) *deviceEnv {
	t.Helper()
	binDir, dumpDir := t.TempDir(), t.TempDir()
	cnitest.ScriptPlugin(t, binDir, "mnu-echo", strings.ReplaceAll(echoPlugin, "DUMPDIR", dumpDir))
	store := devinfo.Store{Root: t.TempDir()}
	e := newEnv(t, func(o *envOptions) {
		o.Devices = fakeDevices{devResource: ids}
		o.DevInfo = store
		o.BinDirs = []string{cnitest.BinDir(t), binDir}
	})
	e.nads.put(podNS, "dev-net", `{"cniVersion":"1.0.0","name":"dev-net","plugins":[{"type":"mnu-echo","capabilities":{"deviceID":true,"CNIDeviceInfoFile":true}}]}`,
		map[string]string{nadv1.ResourceNameAnnotation: devResource})
	return &deviceEnv{env: e, dumpDir: dumpDir, devinfo: store}
}

// runtimeConfig returns the runtimeConfig the echo plugin got for command
// on ifName.
func (d *deviceEnv) runtimeConfig(command, ifName string) map[string]string {
	d.t.Helper()
	b, err := os.ReadFile(filepath.Join(d.dumpDir, command+"-"+ifName+".json"))
	if err != nil {
		d.t.Fatalf("the echo plugin's %s on %s: %v", command, ifName, err)
	}
	var conf struct {
		RuntimeConfig map[string]string `json:"runtimeConfig"`
	}
	if err := json.Unmarshal(b, &conf); err != nil {
		d.t.Fatalf("stdin of %s on %s: %v\n%s", command, ifName, err, b)
	}
	return conf.RuntimeConfig
}

// The Nth attachment of a resourceName network gets the Nth device kubelet
// allocated, as runtimeConfig deviceID; the device plugin's device-info file
// is copied to a CNI device-info file whose path goes to the plugin as
// CNIDeviceInfoFile (device-info spec §4) and whose content is the entry's
// "device-info" in network-status (§5.3.8); DEL removes the CNI file.
func TestAddDeviceNetworks(t *testing.T) {
	ids := []string{"0000:00:01.0", "0000:00:01.1"}
	d := newDeviceEnv(t, ids...)
	info := &devinfo.DeviceInfo{Type: devinfo.TypePCI, Version: devinfo.SpecVersion, PCI: &devinfo.PCI{PCIAddress: ids[0]}}
	if _, err := d.devinfo.WriteDP(devResource, ids[0], info); err != nil {
		t.Fatal(err)
	}
	pod := d.podWithNetworks("dev-net,dev-net")
	id := "ctr-" + cnitest.UniqueName("")
	d.add(id, pod)

	var files []string
	for i, ifName := range []string{"net1", "net2"} {
		rc := d.runtimeConfig("ADD", ifName)
		if rc["deviceID"] != ids[i] {
			t.Errorf("%s: runtimeConfig deviceID = %q, want %q", ifName, rc["deviceID"], ids[i])
		}
		f := rc["CNIDeviceInfoFile"]
		if filepath.Dir(f) != d.devinfo.CNIDir() {
			t.Errorf("%s: CNIDeviceInfoFile %q is not in %s", ifName, f, d.devinfo.CNIDir())
		}
		files = append(files, f)
	}
	if files[0] == files[1] {
		t.Fatalf("both attachments got CNI device-info file %s", files[0])
	}
	got, err := devinfo.ReadFile(files[0])
	if err != nil {
		t.Fatalf("CNI device-info file of net1: %v", err)
	}
	if got.PCI == nil || got.PCI.PCIAddress != ids[0] {
		t.Errorf("CNI device-info file of net1 = %+v, want the device plugin's", got)
	}
	if _, err := os.Stat(files[1]); !os.IsNotExist(err) {
		t.Errorf("net2's device has no device plugin file, yet %s: %v", files[1], err)
	}

	want, err := info.Encode()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range d.networkStatus(pod) {
		switch s.Interface {
		case "net1":
			if !jsonEqual(t, s.DeviceInfo, want) {
				t.Errorf("network-status net1 device-info = %s, want %s", s.DeviceInfo, want)
			}
		default:
			if len(s.DeviceInfo) != 0 {
				t.Errorf("network-status %s has device-info %s", s.Interface, s.DeviceInfo)
			}
		}
	}
	rec, err := d.store.Load(id)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range rec.Attachments[1:] {
		if a.DeviceID != ids[i] || a.DeviceInfoFile != files[i] {
			t.Errorf("record %s: device %q file %q, want %q %q", a.IfName, a.DeviceID, a.DeviceInfoFile, ids[i], files[i])
		}
	}

	d.del(id, pod)
	if rc := d.runtimeConfig("DEL", "net1"); rc["deviceID"] != ids[0] || rc["CNIDeviceInfoFile"] != files[0] {
		t.Errorf("DEL of net1 got runtimeConfig %v, want the ADD's device and file", rc)
	}
	if _, err := os.Stat(files[0]); !os.IsNotExist(err) {
		t.Errorf("CNI device-info file %s after DEL: %v, want it removed", files[0], err)
	}
}

// A plugin declaring CNIDeviceInfoFile for a device without a device plugin
// file gets a path whose directory exists, so that it can write the file
// itself.
func TestAddDeviceInfoDirForPlugin(t *testing.T) {
	d := newDeviceEnv(t, "0000:00:03.0")
	pod := d.podWithNetworks("dev-net")
	d.add("ctr-"+cnitest.UniqueName(""), pod)
	f := d.runtimeConfig("ADD", "net1")["CNIDeviceInfoFile"]
	if f == "" {
		t.Fatal("no CNIDeviceInfoFile in runtimeConfig")
	}
	if st, err := os.Stat(filepath.Dir(f)); err != nil || !st.IsDir() {
		t.Errorf("the directory of CNIDeviceInfoFile %s, where the plugin writes it, does not exist: %v", f, err)
	}
}

// A resourceName NAD whose plugins do not declare CNIDeviceInfoFile (as
// SR-IOV-style NADs usually do not) still gets the device plugin's
// device-info copied into a CNI device-info file and published in
// network-status (device-info spec §4.2, §6); the plugin is not handed the
// path, and DEL removes the file.
func TestAddDeviceInfoWithoutCapability(t *testing.T) {
	ids := []string{"0000:00:02.0"}
	d := newDeviceEnv(t, ids...)
	d.nads.put(podNS, "nocap-net", `{"cniVersion":"1.0.0","name":"nocap-net","plugins":[{"type":"mnu-echo","capabilities":{"deviceID":true}}]}`,
		map[string]string{nadv1.ResourceNameAnnotation: devResource})
	info := &devinfo.DeviceInfo{Type: devinfo.TypePCI, Version: devinfo.SpecVersion, PCI: &devinfo.PCI{PCIAddress: ids[0]}}
	if _, err := d.devinfo.WriteDP(devResource, ids[0], info); err != nil {
		t.Fatal(err)
	}
	pod := d.podWithNetworks("nocap-net")
	id := "ctr-" + cnitest.UniqueName("")
	d.add(id, pod)

	rc := d.runtimeConfig("ADD", "net1")
	if rc["deviceID"] != ids[0] {
		t.Errorf("runtimeConfig deviceID = %q, want %q", rc["deviceID"], ids[0])
	}
	if f, ok := rc["CNIDeviceInfoFile"]; ok {
		t.Errorf("the plugin does not declare CNIDeviceInfoFile, yet got it: %q", f)
	}
	want, err := info.Encode()
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, s := range d.networkStatus(pod) {
		if s.Interface == "net1" {
			found = true
			if !jsonEqual(t, s.DeviceInfo, want) {
				t.Errorf("network-status net1 device-info = %s, want the device plugin's %s", s.DeviceInfo, want)
			}
		}
	}
	if !found {
		t.Fatal("network-status has no net1")
	}
	rec, err := d.store.Load(id)
	if err != nil {
		t.Fatal(err)
	}
	file := rec.Attachments[1].DeviceInfoFile
	if filepath.Dir(file) != d.devinfo.CNIDir() {
		t.Fatalf("record's CNI device-info file %q is not in %s", file, d.devinfo.CNIDir())
	}
	if got, err := devinfo.ReadFile(file); err != nil || got.PCI == nil || got.PCI.PCIAddress != ids[0] {
		t.Errorf("CNI device-info file %s = %+v (%v), want the device plugin's", file, got, err)
	}
	d.del(id, pod)
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("CNI device-info file %s after DEL: %v, want it removed", file, err)
	}
}

// A pod selecting more attachments of a resource than kubelet allocated
// devices fails before any delegate runs, naming the resource.
func TestAddDeviceNotAllocated(t *testing.T) {
	d := newDeviceEnv(t, "0000:00:01.0")
	pod := d.podWithNetworks("dev-net,dev-net")
	_, err := d.eng.Add(context.Background(), d.req(api.CmdAdd, "ctr-"+cnitest.UniqueName(""), pod))
	if err == nil || !strings.Contains(err.Error(), devResource) || !strings.Contains(err.Error(), "needs device 2") {
		t.Fatalf("ADD = %v, want an error naming the missing device of %s", err, devResource)
	}
	if calls := d.exec.of(""); len(calls) != 0 {
		t.Errorf("delegates ran: %+v", calls)
	}
}

// When an ADD fails, the CNI device-info files prepared for attachments
// never attempted are removed too (§7.2: nothing of the ADD is left).
func TestAddFailureRemovesDeviceInfoFiles(t *testing.T) {
	id0 := "0000:00:01.0"
	d := newDeviceEnv(t, id0)
	info := &devinfo.DeviceInfo{Type: devinfo.TypePCI, Version: devinfo.SpecVersion, PCI: &devinfo.PCI{PCIAddress: id0}}
	if _, err := d.devinfo.WriteDP(devResource, id0, info); err != nil {
		t.Fatal(err)
	}
	d.exec.fail = func(c call) error {
		if c.Command == "ADD" && c.IfName == "net1" {
			return errors.New("injected ADD failure")
		}
		return nil
	}
	d.bridgeNAD("net-a")
	pod := d.podWithNetworks("net-a,dev-net")
	if _, err := d.eng.Add(context.Background(), d.req(api.CmdAdd, "ctr-"+cnitest.UniqueName(""), pod)); err == nil {
		t.Fatal("ADD succeeded")
	}
	entries, err := os.ReadDir(d.devinfo.CNIDir())
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("CNI device-info file %s left after the failed ADD", e.Name())
	}
}

// jsonEqual reports whether a and b hold the same JSON value.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y bytes.Buffer
	if err := json.Compact(&x, a); err != nil {
		return false
	}
	if err := json.Compact(&y, b); err != nil {
		t.Fatal(fmt.Errorf("compact %s: %w", b, err))
	}
	var xv, yv any
	if json.Unmarshal(x.Bytes(), &xv) != nil || json.Unmarshal(y.Bytes(), &yv) != nil {
		return false
	}
	xb, _ := json.Marshal(xv)
	yb, _ := json.Marshal(yv)
	return bytes.Equal(xb, yb)
}
