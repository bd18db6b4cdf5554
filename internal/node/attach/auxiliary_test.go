package attach

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/multinet/multinet/internal/node/cniserver/api"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/internal/testing/cnitest"
	"github.com/multinet/multinet/pkg/spec/netconf"
)

const auxName = "vendor-chain"

// arpFilterConf is a tuning plugin config (no cniVersion, as such files are
// usually written) that sets arp_filter on the interface it runs for.
const arpFilterConf = `{"name":"arp-filter","type":"tuning","sysctl":{"net.ipv4.conf.IFNAME.arp_filter":"1"}}`

// newAuxEnv is an env whose engine runs the auxiliary chain auxName of a
// fresh conf dir, holding files (name → content) in its sub-directory.
func newAuxEnv(t *testing.T, files map[string]string) *env {
	t.Helper()
	confDir := t.TempDir()
	sub := filepath.Join(confDir, auxName)
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(sub, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return newEnv(t, func(o *envOptions) {
		o.AuxiliaryChain = func(v string) (*libcni.NetworkConfigList, error) {
			return netconf.LoadAuxiliaryChain(confDir, auxName, v)
		}
	})
}

// sysctl reads net.ipv4.conf.<ifName>.<key> in the env's pod netns.
func (e *env) sysctl(ifName, key string) string {
	e.t.Helper()
	var out string
	err := e.netns.Do(func(ns.NetNS) error {
		b, err := os.ReadFile(filepath.Join("/proc/sys/net/ipv4/conf", ifName, key))
		out = strings.TrimSpace(string(b))
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// The auxiliary chain runs for every pod after its attachments, on the
// runtime's interface, chained onto the default network's result (tuning
// needs a prevResult); it is recorded (so DEL tears it down first, from the
// record alone) but has no network-status entry and no Event.
func TestAuxiliaryChainRunsLastAndIsTornDownFirst(t *testing.T) {
	e := newAuxEnv(t, map[string]string{"10-arp.conf": arpFilterConf})
	e.bridgeNAD("net-a")
	pod := e.podWithNetworks("net-a")
	id := "ctr-" + cnitest.UniqueName("")
	e.add(id, pod)

	adds := e.exec.of("ADD")
	if got, want := ifNames(adds), []string{"eth0", "net1", "eth0"}; !slices.Equal(got, want) {
		t.Fatalf("delegate ADD interfaces = %q, want %q (the auxiliary chain last, on the runtime's interface)", got, want)
	}
	if last := adds[len(adds)-1]; last.Plugin != "tuning" {
		t.Errorf("last delegate ADD ran %s, want the auxiliary chain's tuning", last.Plugin)
	}
	if got := e.sysctl("eth0", "arp_filter"); got != "1" {
		t.Errorf("eth0 arp_filter = %s after ADD, want 1 (set by the auxiliary chain)", got)
	}
	e.wantLinks("eth0", "net1")

	list := e.networkStatus(pod)
	if len(list) != 2 || list[0].Name != e.defaultNet || list[1].Name != "ns1/net-a" {
		t.Errorf("network-status = %+v, want the default network and ns1/net-a only", list)
	}
	rec, err := e.store.Load(id)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rec.Attachments); n != 3 {
		t.Fatalf("record holds %d attachments, want 3", n)
	}
	aux := rec.Attachments[2]
	if !aux.Auxiliary || aux.Network != auxName || aux.IfName != "eth0" || aux.Phase != state.PhaseAdded {
		t.Errorf("recorded auxiliary attachment = %+v", aux)
	}
	if !strings.Contains(string(aux.ConfList), `"prevResult"`) {
		t.Errorf("recorded auxiliary config has no prevResult: %s", aux.ConfList)
	}

	e.exec.reset()
	e.del(id, pod)
	dels := e.exec.of("DEL")
	if len(dels) == 0 || dels[0].Plugin != "tuning" || dels[0].IfName != "eth0" {
		t.Errorf("first delegate DEL = %+v, want the auxiliary chain's tuning on eth0", dels)
	}
	if _, err := e.store.Load(id); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("record after DEL: %v, want none", err)
	}
	e.wantLeases(e.defaultNet, 0)
	e.wantLeases("net-a", 0)
}

// An empty (or missing) sub-directory means no auxiliary chain: nothing
// more runs and nothing more is recorded.
func TestAuxiliaryChainEmptyDirectoryRunsNothing(t *testing.T) {
	e := newAuxEnv(t, map[string]string{"README": "not a .conf file"})
	pod := e.pod(nil)
	id := "ctr-" + cnitest.UniqueName("")
	e.add(id, pod)
	if got := ifNames(e.exec.of("ADD")); !slices.Equal(got, []string{"eth0"}) {
		t.Errorf("delegate ADD interfaces = %q, want the default network's eth0 only", got)
	}
	rec, err := e.store.Load(id)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Attachments) != 1 {
		t.Errorf("record holds %d attachments, want 1", len(rec.Attachments))
	}
	e.del(id, pod)
}

// A file of the chain that cannot be used fails the ADD before any delegate
// runs, naming the chain: the operator asked for it on every pod.
func TestAuxiliaryChainUnusableFileFailsAdd(t *testing.T) {
	for name, content := range map[string]string{
		"not JSON":     `{"type":`,
		"the shim":     `{"type":"multinet-shim"}`,
		"missing type": `{"name":"x"}`,
	} {
		t.Run(name, func(t *testing.T) {
			e := newAuxEnv(t, map[string]string{"10-x.conf": content})
			pod := e.pod(nil)
			_, err := e.eng.Add(context.Background(), e.req(api.CmdAdd, "ctr-"+cnitest.UniqueName(""), pod))
			var te *types.Error
			if !errors.As(err, &te) || te.Code != types.ErrInvalidNetworkConfig || !strings.Contains(te.Msg, auxName) {
				t.Fatalf("ADD error = %v, want code 7 naming %s", err, auxName)
			}
			if n := len(e.exec.of("ADD")); n != 0 {
				t.Errorf("%d delegate ADDs ran, want none", n)
			}
		})
	}
}

// A failing auxiliary chain fails the ADD and rolls back every attachment
// (§7.2), the chain itself included.
func TestAuxiliaryChainFailureRollsBack(t *testing.T) {
	e := newAuxEnv(t, map[string]string{"10-arp.conf": arpFilterConf})
	e.bridgeNAD("net-a")
	pod := e.podWithNetworks("net-a")
	e.exec.fail = func(c call) error {
		if c.Command == "ADD" && c.Plugin == "tuning" {
			return errors.New("tuning broke")
		}
		return nil
	}
	id := "ctr-" + cnitest.UniqueName("")
	if _, err := e.eng.Add(context.Background(), e.req(api.CmdAdd, id, pod)); err == nil || !strings.Contains(err.Error(), "tuning broke") {
		t.Fatalf("ADD error = %v, want the auxiliary chain's failure", err)
	}
	dels := e.exec.of("DEL")
	if got, want := ifNames(dels), []string{"eth0", "net1", "eth0"}; !slices.Equal(got, want) {
		t.Errorf("rollback DEL interfaces = %q, want %q (auxiliary chain, net-a, default network)", got, want)
	}
	e.wantLinks()
	e.wantLeases(e.defaultNet, 0)
	e.wantLeases("net-a", 0)
}
