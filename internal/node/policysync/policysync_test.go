package policysync

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multinet/multinet/api/k8s.cni.cncf.io/v1beta2"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/pkg/spec/policy"
)

// clientsPolicy allows ingress on network "net" of pods app=web from
// pods role=client of namespaces team=b.
func clientsPolicy() *v1beta2.MultiNetworkPolicy {
	return &v1beta2.MultiNetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web-from-clients", Annotations: map[string]string{v1beta2.PolicyForAnnotation: "net"}},
		Spec: v1beta2.MultiNetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Ingress: []v1beta2.MultiNetworkPolicyIngressRule{{From: []v1beta2.MultiNetworkPolicyPeer{{
				PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}},
			}}}},
		},
	}
}

// statusOn is a network-status annotation with one entry of network on
// net1 with addr.
func statusOn(network, addr string) string {
	return fmt.Sprintf(`[{"name":"default","interface":"eth0","ips":["10.244.0.9"],"default":true},{"name":%q,"interface":"net1","ips":[%q]}]`, network, addr)
}

// TestRulesInPlaceWhenEnforceReturns: Enforce (what ADD calls before it
// answers) returns with the pod's table in its netns, allowing the peers
// the policy names, and without a table for a pod no policy selects.
func TestRulesInPlaceWhenEnforceReturns(t *testing.T) {
	e := newEnv(t)
	peers := e.ns + "-b"
	e.namespace(peers, map[string]string{"team": "b"})
	e.pod(peers, "client", "node-b", map[string]string{"role": "client"}, statusOn(e.ns+"/net", "10.9.0.7"))
	e.policy(clientsPolicy())
	c, _ := e.controller()

	web := e.pod(e.ns, "web", node, map[string]string{"app": "web"}, "")
	rec, netns := e.sandbox("web-1", web, "10.9.0.5", "")
	if err := c.Enforce(context.Background(), web, rec); err != nil {
		t.Fatal(err)
	}
	if !hasTable(t, netns) {
		t.Fatal("no table in the pod's netns when Enforce returned")
	}
	if got := e.writer.ingressPeers(rec.Netns); !slices.Equal(got, []string{"10.9.0.7/32"}) {
		t.Errorf("ingress peers %q, want [10.9.0.7/32]", got)
	}

	other := e.pod(e.ns, "other", node, map[string]string{"app": "other"}, "")
	rec2, netns2 := e.sandbox("other-1", other, "10.9.0.6", "")
	if err := c.Enforce(context.Background(), other, rec2); err != nil {
		t.Fatal(err)
	}
	if hasTable(t, netns2) {
		t.Error("a table in the netns of a pod no policy selects")
	}
}

// TestRulesFollowChanges: the rules follow a peer namespace's labels, the
// pod's own labels, a peer's network-status and the policy's deletion,
// each measured from the change (latency samples).
func TestRulesFollowChanges(t *testing.T) {
	e := newEnv(t)
	peers := e.ns + "-b"
	e.namespace(peers, map[string]string{"team": "b"})
	e.pod(peers, "client", "node-b", map[string]string{"role": "client"}, statusOn(e.ns+"/net", "10.9.0.7"))
	pol := e.policy(clientsPolicy())
	c, _ := e.controller()
	web := e.pod(e.ns, "web", node, map[string]string{"app": "web"}, "")
	rec, netns := e.sandbox("web-1", web, "10.9.0.5", "")
	if err := c.Enforce(context.Background(), web, rec); err != nil {
		t.Fatal(err)
	}
	peersAre := func(want ...string) func() bool {
		return func() bool { return slices.Equal(e.writer.ingressPeers(rec.Netns), want) }
	}

	e.relabelNamespace(peers, map[string]string{"team": "c"})
	eventually(t, "the peer namespace's new labels drop 10.9.0.7", func() bool { return hasTable(t, netns) && peersAre()() })
	e.relabelNamespace(peers, map[string]string{"team": "b"})
	eventually(t, "10.9.0.7 allowed again", peersAre("10.9.0.7/32"))

	e.pod(peers, "client2", "node-b", map[string]string{"role": "client"}, statusOn(e.ns+"/net", "10.9.0.8"))
	eventually(t, "a new peer pod allowed", peersAre("10.9.0.7/32", "10.9.0.8/32"))

	e.relabelPod(e.ns, "web", map[string]string{"app": "other"})
	eventually(t, "the table removed when the pod's labels no longer match", func() bool { return !hasTable(t, netns) })
	e.relabelPod(e.ns, "web", map[string]string{"app": "web"})
	eventually(t, "the table back when they match again", func() bool { return hasTable(t, netns) })

	if err := e.pols.MultiNetworkPolicies(e.ns).Delete(context.Background(), pol.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the table removed with the policy", func() bool { return !hasTable(t, netns) })
	e.obs.mu.Lock()
	defer e.obs.mu.Unlock()
	if len(e.obs.latencies) == 0 {
		t.Error("no change-to-rules latency observed")
	}
}

// TestRestartResyncsAndReleaseRemoves: a new controller over the same
// records (multinetd restarted) re-syncs every sandbox once its informers
// have listed, finding the table already right (nothing written: an
// established connection is kept); Release (DEL) leaves no table.
func TestRestartResyncsAndReleaseRemoves(t *testing.T) {
	e := newEnv(t)
	e.policy(clientsPolicy())
	c, stop := e.controller()
	web := e.pod(e.ns, "web", node, map[string]string{"app": "web"}, "")
	rec, netns := e.sandbox("web-1", web, "10.9.0.5", "")
	if err := c.Enforce(context.Background(), web, rec); err != nil {
		t.Fatal(err)
	}
	stop()
	unchanged := e.obs.count(ResultUnchanged)
	c2, _ := e.controller()
	eventually(t, "the restarted controller re-syncs the sandbox", func() bool { return e.obs.count(ResultUnchanged) > unchanged })
	if !hasTable(t, netns) {
		t.Fatal("table gone after the restart")
	}
	if err := c2.Release(context.Background(), rec.ContainerID, rec.Netns); err != nil {
		t.Fatal(err)
	}
	if hasTable(t, netns) {
		t.Error("table left after Release")
	}
}

// TestNoKernelInterfaceIsReported: an attachment a policy selects that has
// no kernel interface in the pod (vhost-user: the CNI result names no
// interface in the sandbox) gets a Warning Event on the pod and on the
// policy, once, and no rules.
func TestNoKernelInterfaceIsReported(t *testing.T) {
	e := newEnv(t)
	pol := e.policy(clientsPolicy())
	c, _ := e.controller()
	web := e.pod(e.ns, "web", node, map[string]string{"app": "web"}, "")
	vhost := `{"cniVersion":"1.0.0","interfaces":[{"name":"vhu-1","socketPath":"/var/run/vhu.sock"}],"ips":[]}`
	rec, netns := e.sandbox("web-1", web, "", vhost)
	for range 2 {
		if err := c.Enforce(context.Background(), web, rec); err != nil {
			t.Fatal(err)
		}
	}
	if hasTable(t, netns) {
		t.Error("a table for an attachment without a kernel interface")
	}
	onPod := e.events.of("Pod", e.ns+"/web", policy.ReasonNoKernelInterface)
	onPolicy := e.events.of("MultiNetworkPolicy", e.ns+"/"+pol.Name, policy.ReasonNoKernelInterface)
	if len(onPod) != 1 || len(onPolicy) != 1 {
		t.Fatalf("NoKernelInterface Events: %d on the pod, %d on the policy, want 1 and 1 (all: %+v)", len(onPod), len(onPolicy), e.events.all)
	}
}

// TestBadPolicyIsReported: a policy naming a network that does not exist
// gets a Warning Event on the policy when it is created (the node has a
// pod in its namespace) and changes nothing.
func TestBadPolicyIsReported(t *testing.T) {
	e := newEnv(t)
	c, _ := e.controller()
	web := e.pod(e.ns, "web", node, map[string]string{"app": "web"}, "")
	rec, netns := e.sandbox("web-1", web, "10.9.0.5", "")
	if err := c.Enforce(context.Background(), web, rec); err != nil {
		t.Fatal(err)
	}
	p := clientsPolicy()
	p.Annotations[v1beta2.PolicyForAnnotation] = "no-such-net"
	p = e.policy(p)
	eventually(t, "an UnknownNetwork Event on the policy", func() bool {
		return len(e.events.of("MultiNetworkPolicy", e.ns+"/"+p.Name, policy.ReasonUnknownNetwork)) > 0
	})
	if hasTable(t, netns) {
		t.Error("the policy naming no existing network changed the pod's netns")
	}
}

// TestChangesSyncOnlyWhatTheyRead: a pod's change re-syncs only the local
// sandboxes selected by a policy that reads the pod as a peer (in its old
// or new version), and a policy's change only those its versions select;
// a sandbox whose pod the informer does not have is always included. A
// re-sync that computes the rules this multinetd last wrote writes
// nothing and reads nothing from the netns.
func TestChangesSyncOnlyWhatTheyRead(t *testing.T) {
	e := newEnv(t)
	peers := e.ns + "-b"
	e.namespace(peers, map[string]string{"team": "b"})
	e.pod(peers, "client", "node-b", map[string]string{"role": "client"}, statusOn(e.ns+"/net", "10.9.0.7"))
	e.pod(peers, "batch", "node-b", map[string]string{"role": "batch"}, statusOn(e.ns+"/net", "10.9.0.8"))
	pol := e.policy(clientsPolicy())
	c, _ := e.controller()
	web := e.pod(e.ns, "web", node, map[string]string{"app": "web"}, "")
	other := e.pod(e.ns, "other", node, map[string]string{"app": "other"}, "")
	for _, sb := range []struct {
		id  string
		pod *corev1.Pod
	}{{"web-1", web}, {"other-1", other}} {
		rec, _ := e.sandbox(sb.id, sb.pod, "10.9.0.5", "")
		if err := c.Enforce(context.Background(), sb.pod, rec); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the informer has the four pods", func() bool {
		_, a := c.peers.get(peers, "client")
		_, b := c.peers.get(peers, "batch")
		_, d := c.peers.get(e.ns, "other")
		_, w := c.peers.get(e.ns, "web")
		return a && b && d && w
	})
	podOf := func(ns, name string) []policy.Pod { p, _ := c.peers.get(ns, name); return []policy.Pod{p} }
	for _, tc := range []struct {
		what string
		got  []string
		want []string
	}{
		{"readers of the client pod", c.readersOf(podOf(peers, "client")), []string{"web-1"}},
		{"readers of the batch pod (no peer selects it)", c.readersOf(podOf(peers, "batch")), nil},
		{"readers of the local unselected pod", c.readersOf(podOf(e.ns, "other")), nil},
		{"sandboxes the policy selects", c.selectedBy([]*v1beta2.MultiNetworkPolicy{pol}), []string{"web-1"}},
	} {
		if !slices.Equal(tc.got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.what, tc.got, tc.want)
		}
	}
	// Behaviour: a change of the batch pod syncs nothing; then a change of
	// the client pod that keeps its address syncs web-1 alone, which
	// finds its rules unchanged without writing or reading the netns.
	settle := func() {
		eventually(t, "the queue empty", func() bool { return c.queue.Len() == 0 })
		time.Sleep(300 * time.Millisecond) // a sync being processed ends; not a timing assertion
	}
	settle() // the syncs the pods' creation queued
	e.obs.mu.Lock()
	samples := len(e.obs.latencies)
	e.obs.mu.Unlock()
	e.writer.mu.Lock()
	applies := e.writer.applies
	e.writer.mu.Unlock()
	e.relabelPod(peers, "batch", map[string]string{"role": "batch", "x": "1"})
	e.relabelPod(peers, "client", map[string]string{"role": "client", "x": "1"})
	eventually(t, "the client pod's change synced", func() bool {
		e.obs.mu.Lock()
		defer e.obs.mu.Unlock()
		return len(e.obs.latencies) > samples
	})
	settle() // a wrong extra sync shows
	e.obs.mu.Lock()
	synced := len(e.obs.latencies) - samples
	e.obs.mu.Unlock()
	if synced != 1 {
		t.Errorf("%d sandboxes synced after the two changes, want 1 (web-1, for the client pod)", synced)
	}
	e.writer.mu.Lock()
	if e.writer.applies != applies {
		t.Errorf("Writer.Apply called %d times for rules this multinetd had written, want 0", e.writer.applies-applies)
	}
	e.writer.mu.Unlock()

	ghost := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "ghost", UID: "ghost-uid"}}
	rec, _ := e.sandbox("ghost-1", ghost, "10.9.0.6", "")
	if err := c.Enforce(context.Background(), ghost, rec); err != nil {
		t.Fatal(err)
	}
	if got := c.selectedBy([]*v1beta2.MultiNetworkPolicy{pol}); !slices.Equal(got, []string{"ghost-1", "web-1"}) {
		t.Errorf("sandboxes the policy selects with a pod the informer does not have: %q, want [ghost-1 web-1]", got)
	}
}

// TestPlannedAttachmentGetsRulesFirst: an attachment a hot-plug has
// planned and whose delegate has not run (no interface yet, no result)
// gets its rules in the table already, so that the interface is filtered
// from the moment the delegate makes it.
func TestPlannedAttachmentGetsRulesFirst(t *testing.T) {
	e := newEnv(t)
	e.policy(clientsPolicy())
	c, _ := e.controller()
	web := e.pod(e.ns, "web", node, map[string]string{"app": "web"}, "")
	rec, netns := e.sandbox("web-1", web, "10.9.0.5", "")
	rec.Attachments = append(rec.Attachments, state.Attachment{Network: e.ns + "/net", IfName: "net2", Phase: state.PhasePlanned, HotPlugged: true})
	if err := c.Enforce(context.Background(), web, rec); err != nil {
		t.Fatal(err)
	}
	if !hasTable(t, netns) {
		t.Fatal("no table")
	}
	e.writer.mu.Lock()
	defer e.writer.mu.Unlock()
	var isolated []string
	for _, in := range e.writer.last[rec.Netns] {
		if in.Ingress.Isolated {
			isolated = append(isolated, in.Name)
		}
	}
	if !slices.Equal(isolated, []string{"net1", "net2"}) {
		t.Errorf("interfaces isolated in the table: %q, want net1 and the planned net2", isolated)
	}
}
