package attach

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/pkg/testutils"
	corev1 "k8s.io/api/core/v1"

	"github.com/multinet/multinet/internal/node/cnirequest"
	"github.com/multinet/multinet/internal/node/cniserver/api"
	"github.com/multinet/multinet/internal/node/kube"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/internal/testing/cnitest"
)

// addThree attaches the default network and net-a, net-b, net-c to a new
// pod's container and returns the pod and container ID.
func (e *env) addThree() (*corev1.Pod, string) {
	e.t.Helper()
	for _, n := range []string{"net-a", "net-b", "net-c"} {
		e.bridgeNAD(n)
	}
	pod := e.podWithNetworks("net-a,net-b,net-c")
	id := "ctr-" + cnitest.UniqueName("")
	e.add(id, pod)
	e.exec.reset()
	return pod, id
}

// wantNoLeases fails the test unless every network of addThree is released.
func (e *env) wantNoLeases() {
	e.t.Helper()
	for _, n := range []string{e.defaultNet, "net-a", "net-b", "net-c"} {
		e.wantLeases(n, 0)
	}
}

// DEL tears down every recorded attachment in reverse order (§7.2) from the
// record alone: the NADs deleted and the API server down change nothing.
// With CNI_NETNS empty or already gone every delegate still runs (without a
// netns) so that IPAM releases the addresses. A second DEL succeeds.
func TestDelFromRecord(t *testing.T) {
	tests := []struct {
		name string
		// netns returns the CNI_NETNS of the DEL.
		netns func(e *env) string
		// wantNetns is the CNI_NETNS the delegates get ("" or the env's).
		keepNetns bool
	}{
		{name: "netns present", netns: func(e *env) string { return e.netns.Path() }, keepNetns: true},
		{name: "netns empty", netns: func(*env) string { return "" }},
		{name: "netns removed", netns: func(e *env) string {
			p := e.netns.Path()
			if err := e.netns.Close(); err != nil {
				t.Fatal(err)
			}
			if err := testutils.UnmountNS(e.netns); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Fatalf("netns %s still there: %v", p, err)
			}
			return p
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			pod, id := e.addThree()
			e.nads.clear()
			e.pods.setErr(errors.New("API server down"))

			req := e.req(api.CmdDel, id, pod)
			req.Netns = tt.netns(e)
			if err := e.eng.Del(context.Background(), req); err != nil {
				t.Fatalf("DEL: %v", err)
			}
			dels := e.exec.of("DEL")
			if got, want := ifNames(dels), []string{"net3", "net2", "net1", "eth0"}; !slices.Equal(got, want) {
				t.Errorf("delegate DELs = %q, want %q (reverse order)", got, want)
			}
			for _, c := range dels {
				if want := map[bool]string{true: e.netns.Path(), false: ""}[tt.keepNetns]; c.Netns != want {
					t.Errorf("DEL of %s got CNI_NETNS %q, want %q", c.IfName, c.Netns, want)
				}
			}
			e.wantNoLeases()
			if tt.keepNetns {
				e.wantLinks()
			}
			if _, err := e.store.Load(id); !errors.Is(err, state.ErrNotFound) {
				t.Errorf("record after DEL: %v, want ErrNotFound", err)
			}

			// DEL again (the runtime retries): no record, the API server
			// down: the default network's DEL, which finds nothing to do.
			e.exec.reset()
			if err := e.eng.Del(context.Background(), req); err != nil {
				t.Fatalf("second DEL: %v", err)
			}
			if got := ifNames(e.exec.of("DEL")); !slices.Equal(got, []string{"eth0"}) {
				t.Errorf("second DEL ran %q, want the default network's only", got)
			}
		})
	}
}

// Without Options.BinDirs the delegates are found in the request's CNI_PATH,
// on DEL and GC as on ADD (regression: teardown looked in no directory and
// every DEL failed with "no paths provided").
func TestDelUsesRequestCNIPath(t *testing.T) {
	e := newEnv(t, nil)
	if len(e.eng.opts.BinDirs) != 0 {
		t.Fatal("env sets BinDirs")
	}
	pod, id := e.addThree()
	e.del(id, pod)
	e.wantNoLeases()
}

// A corrupt record is reported and DEL falls back to what libcni's cache and
// the API server know (a corrupt record must not make DEL skip every
// delegate): the pod's current networks
// when it is there. With the API server down DEL tears down what it can and
// fails (TestDelCorruptRecordAPIDown); it used to tear down eth0 only and
// succeed, leaking net1..net3.
func TestDelCorruptRecord(t *testing.T) {
	tests := []struct {
		name     string
		podGone  bool
		wantDels []string
		// released are the networks whose addresses must be freed.
		released  []string
		wantEvent bool
	}{
		{name: "pod known", wantDels: []string{"net3", "net2", "net1", "eth0"}, released: []string{"mnu-default", "net-a", "net-b", "net-c"}, wantEvent: true},
		{name: "pod gone", podGone: true, wantDels: []string{"net3", "net2", "net1", "eth0"}, released: []string{"mnu-default", "net-a", "net-b", "net-c"}, wantEvent: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			pod, id := e.addThree()
			cnitest.WriteFile(t, e.store.Dir(), id+".json", []byte(`{"containerID":`))
			if tt.podGone { // NotFound: libcni's cache is all there is
				e.pods.mu.Lock()
				delete(e.pods.pods, pod.Namespace+"/"+pod.Name)
				e.pods.mu.Unlock()
			}
			e.del(id, pod)
			if got := ifNames(e.exec.of("DEL")); !slices.Equal(got, tt.wantDels) {
				t.Errorf("delegate DELs = %q, want %q", got, tt.wantDels)
			}
			for _, n := range tt.released {
				e.wantLeases(n, 0)
			}
			if _, err := e.store.Load(id); !errors.Is(err, state.ErrNotFound) {
				t.Errorf("record after DEL: %v, want ErrNotFound", err)
			}
			if got := e.events.of("Warning", kube.ReasonCorruptRecord); (len(got) == 1) != tt.wantEvent {
				t.Errorf("CorruptAttachmentRecord events = %+v, want %v", got, tt.wantEvent)
			}
		})
	}
}

// A delegate DEL that fails does not stop the others (§7.2); DEL reports the
// failure, keeps the failed attachment in the record, and the retry does
// only that one.
func TestDelContinuesPastFailure(t *testing.T) {
	e := newEnv(t, nil)
	pod, id := e.addThree()
	boom := errors.New("injected DEL failure")
	e.exec.fail = func(c call) error {
		if c.Command == "DEL" && c.IfName == "net2" {
			return boom
		}
		return nil
	}
	err := e.eng.Del(context.Background(), e.req(api.CmdDel, id, pod))
	var te *types.Error
	if !errors.As(err, &te) || !strings.Contains(te.Msg, "ns1/net-b") || !strings.Contains(te.Msg, boom.Error()) {
		t.Fatalf("DEL error = %v, want a CNI error naming ns1/net-b and the failure", err)
	}
	if got, want := ifNames(e.exec.of("DEL")), []string{"net3", "net2", "net1", "eth0"}; !slices.Equal(got, want) {
		t.Errorf("delegate DELs = %q, want %q", got, want)
	}
	for _, n := range []string{e.defaultNet, "net-a", "net-c"} {
		e.wantLeases(n, 0)
	}
	rec, err := e.store.Load(id)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Attachments) != 1 || rec.Attachments[0].IfName != "net2" {
		t.Fatalf("record after the failed DEL has %+v, want net2 only", rec.Attachments)
	}

	e.exec.fail = nil
	e.exec.reset()
	e.del(id, pod)
	if got := ifNames(e.exec.of("DEL")); !slices.Equal(got, []string{"net2"}) {
		t.Errorf("retried DEL ran %q, want net2 only", got)
	}
	e.wantNoLeases()
}

// CHECK checks every attachment, not only the default network's, and names
// the broken one.
func TestCheck(t *testing.T) {
	e := newEnv(t, nil)
	pod, id := e.addThree()
	check := func() error { return e.eng.Check(context.Background(), e.req(api.CmdCheck, id, pod)) }
	if err := check(); err != nil {
		t.Fatalf("CHECK after ADD: %v", err)
	}
	if got, want := ifNames(e.exec.of("CHECK")), []string{"eth0", "net1", "net2", "net3"}; !slices.Equal(got, want) {
		t.Errorf("delegate CHECKs = %q, want %q", got, want)
	}

	h := cnitest.Handle(t, e.netns)
	l, err := h.LinkByName("net2")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LinkDel(l); err != nil {
		t.Fatal(err)
	}
	err = check()
	var te *types.Error
	if !errors.As(err, &te) || !strings.Contains(te.Msg, "ns1/net-b") || !strings.Contains(te.Msg, "net2") {
		t.Fatalf("CHECK with net2 deleted = %v, want a CNI error naming ns1/net-b and net2", err)
	}
	if strings.Contains(te.Msg, "net-a") || strings.Contains(te.Msg, "net-c") {
		t.Errorf("CHECK error %q blames healthy attachments", te.Msg)
	}

	if err := e.eng.Check(context.Background(), e.req(api.CmdCheck, "ctr-unknown", pod)); err == nil {
		t.Error("CHECK of a container without a record succeeded")
	}
}

// CHECK skips the attachments whose cniVersion is below 0.4.0 (CHECK came
// with CNI spec 0.4.0; libcni refuses it for them) and still checks the
// others.
func TestCheckSkipsDelegatesBelow040(t *testing.T) {
	e := newEnv(t, nil)
	for _, v := range []string{"0.3.1", "0.3.0"} {
		name := "net-v" + strings.ReplaceAll(v, ".", "")
		conf := strings.Replace(e.bridgeConf(name, ""), `"cniVersion":"1.0.0"`, fmt.Sprintf(`"cniVersion":%q`, v), 1)
		e.nads.put(podNS, name, conf, nil)
	}
	e.bridgeNAD("net-new")
	pod := e.podWithNetworks("net-v031,net-v030,net-new")
	id := "ctr-" + cnitest.UniqueName("")
	e.add(id, pod)
	e.exec.reset()

	if err := e.eng.Check(context.Background(), e.req(api.CmdCheck, id, pod)); err != nil {
		t.Fatalf("CHECK with delegates at 0.3.1 and 0.3.0: %v", err)
	}
	if got, want := ifNames(e.exec.of("CHECK")), []string{"eth0", "net3"}; !slices.Equal(got, want) {
		t.Errorf("delegate CHECKs = %q, want %q (net1, net2 below 0.4.0 skipped)", got, want)
	}

	// A broken attachment at 1.0.0 is still reported.
	h := cnitest.Handle(t, e.netns)
	l, err := h.LinkByName("net3")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LinkDel(l); err != nil {
		t.Fatal(err)
	}
	err = e.eng.Check(context.Background(), e.req(api.CmdCheck, id, pod))
	var te *types.Error
	if !errors.As(err, &te) || !strings.Contains(te.Msg, "ns1/net-new") || strings.Contains(te.Msg, "net-v03") {
		t.Fatalf("CHECK with net3 deleted = %v, want a CNI error naming ns1/net-new only", err)
	}
}

// GC (CNI 1.1) tears down and forgets the containers missing from
// cni.dev/valid-attachments, releasing their addresses, and keeps the valid
// ones untouched.
func TestGC(t *testing.T) {
	e := newEnv(t, nil)
	e.bridgeNAD("net-a")
	gone, kept := e.podWithNetworks("net-a"), e.podWithNetworks("net-a")
	goneID, keptID := "ctr-gone-"+cnitest.UniqueName(""), "ctr-kept-"+cnitest.UniqueName("")
	e.add(goneID, gone)
	keptNS := cnitest.NewNS(t)
	req := e.req(api.CmdAdd, keptID, kept)
	req.Netns = keptNS.Path()
	if _, err := e.eng.Add(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	e.exec.reset()

	if err := e.eng.GC(context.Background(), e.gcReq(keptID)); err != nil {
		t.Fatalf("GC: %v", err)
	}
	for _, c := range e.exec.of("DEL") {
		if c.ContainerID != goneID {
			t.Errorf("GC ran DEL on %s %s, a valid attachment", c.ContainerID, c.IfName)
		}
	}
	if got := ifNames(e.exec.of("DEL")); !slices.Equal(got, []string{"net1", "eth0"}) {
		t.Errorf("GC's DELs = %q, want net1, eth0 of the gone container", got)
	}
	for _, n := range []string{e.defaultNet, "net-a"} {
		if got := e.leases(n); len(got) != 1 || !strings.Contains(got[0], keptID) {
			t.Errorf("leases of %s after GC = %q, want the kept container's only", n, got)
		}
	}
	if _, err := e.store.Load(goneID); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("record of the gone container: %v, want ErrNotFound", err)
	}
	if rec, err := e.store.Load(keptID); err != nil || len(rec.Attachments) != 2 {
		t.Errorf("record of the kept container: %v, %v", rec, err)
	}
}

// A valid container whose record cannot be read is not treated as stale:
// GC reports the record and leaves the delegates' cached attachments alone
// (else libcni's GC would DEL a running pod's networks).
func TestGCKeepsValidContainerWithUnreadableRecord(t *testing.T) {
	e := newEnv(t, nil)
	e.bridgeNAD("net-a")
	pod := e.podWithNetworks("net-a")
	id := "ctr-" + cnitest.UniqueName("")
	e.add(id, pod)
	e.exec.reset()
	cnitest.WriteFile(t, e.store.Dir(), id+".json", []byte("not json"))

	err := e.eng.GC(context.Background(), e.gcReq(id))
	if err == nil || !strings.Contains(err.Error(), id) {
		t.Errorf("GC error = %v, want one naming the unreadable record of %s", err, id)
	}
	if calls := e.exec.of("DEL"); len(calls) != 0 {
		t.Errorf("GC ran DEL on a valid container: %+v", calls)
	}
	e.wantLeases(e.defaultNet, 1)
	e.wantLeases("net-a", 1)
	e.wantLinks("eth0", "net1")
}

// gcReq is a GC request whose valid attachments are the given containers'
// eth0.
func (e *env) gcReq(valid ...string) *cnirequest.Request {
	var atts []types.GCAttachment
	for _, id := range valid {
		atts = append(atts, types.GCAttachment{ContainerID: id, IfName: "eth0"})
	}
	cfg, err := json.Marshal(map[string]any{"cniVersion": "1.1.0", "name": "multinet", "cni.dev/valid-attachments": atts})
	if err != nil {
		e.t.Fatal(err)
	}
	return cnirequest.Decode(&api.Request{V: api.Version, Command: api.CmdGC, Path: e.bin, Config: cfg})
}

// STATUS (CNI 1.1) is not ready (code 50) until the default network's
// config is there and the daemon is ready.
func TestStatus(t *testing.T) {
	tests := []struct {
		name     string
		def      func(*env) DefaultNetworkFunc
		ready    error
		wantCode uint
		wantMsg  string
	}{
		{name: "ready"},
		{name: "informers not synced", ready: errors.New("informers not synced"), wantCode: 50, wantMsg: "informers not synced"},
		{
			name: "default network missing",
			def: func(*env) DefaultNetworkFunc {
				return func() (*libcni.NetworkConfigList, string, error) {
					return nil, "", fmt.Errorf("no CNI config in %s", filepath.Join("/nonexistent", "net.d"))
				}
			},
			wantCode: 50, wantMsg: "no CNI config",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(o *envOptions) {
				o.Ready = func() error { return tt.ready }
			})
			if tt.def != nil {
				e.eng.opts.DefaultNetwork = tt.def(e)
			}
			err := e.eng.Status(context.Background(), cnirequest.Decode(&api.Request{V: api.Version, Command: api.CmdStatus, Path: e.bin, Config: json.RawMessage(`{"cniVersion":"1.1.0"}`)}))
			if tt.wantCode == 0 {
				if err != nil {
					t.Fatalf("STATUS: %v", err)
				}
				return
			}
			var te *types.Error
			if !errors.As(err, &te) || te.Code != tt.wantCode || !strings.Contains(te.Msg, tt.wantMsg) {
				t.Fatalf("STATUS = %v, want code %d naming %q", err, tt.wantCode, tt.wantMsg)
			}
		})
	}
}
