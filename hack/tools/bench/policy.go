package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/multinet/multinet/api/k8s.cni.cncf.io/v1beta2"
	mnpclient "github.com/multinet/multinet/pkg/client/clientset/versioned/typed/k8s.cni.cncf.io/v1beta2"
	"github.com/multinet/multinet/pkg/spec/status"
)

// The policy phase (docs/bench.md "Network policy"): -policy-pods pods
// (as many as the node takes) running on the node with both bench
// networks, and -policy-count MultiNetworkPolicies for both networks. They
// are real pods (the kubelet makes their sandboxes through multinet):
// multinetd's peers are the pods that have not finished, so the other
// phases' pods, which the kubelet rejects (phase Failed), would be no one's
// peer and their label changes would not reach multinetd. Pod i is in group
// i mod count (label policyGroupLabel), except the last policyMovers pods,
// which start idle (no policy selects them nor names them as a peer).
// Policy k selects group k, allows ingress from group k+1 (and an ipBlock)
// on TCP 8080 and UDP 5000-5100, and egress to group k+2 on TCP 443. A
// change moves an idle pod into group k (selected by policy k, a peer of
// policies k-1 and k-2, whose pods' rules gain its addresses) or back.

// policyGroupLabel is the bench pods' label the policies select on.
const policyGroupLabel = "multinet.io/bench-group"

// policyIdle is the group of pods no policy selects or names.
const policyIdle = "idle"

// policyMovers is how many pods the label changes move.
const policyMovers = 10

// policyWithin bounds every wait for rules to be in place.
const policyWithin = 30 * time.Second

// policyOptions are the policy phase's flags.
type policyOptions struct {
	pods, count, changes, adds int
}

// policyFlags registers the policy phase's flags.
func policyFlags(o *policyOptions) {
	flag.IntVar(&o.pods, "policy-pods", 300, "pods running on the node with both bench networks for the policy phase (fewer when the kubelet's maxPods or the subnets cannot hold them; 0 skips the phase)")
	flag.IntVar(&o.count, "policy-count", 50, "MultiNetworkPolicies of the policy phase")
	flag.IntVar(&o.changes, "policy-changes", 100, "label changes timed to rules in place (half select a pod, half unselect it)")
	flag.IntVar(&o.adds, "policy-adds", 100, "ADDs each of a selected and of an unselected pod, alternated")
}

// check validates the flags.
func (o policyOptions) check() error {
	if o.pods < 0 || o.count < 3 || o.changes < 2 || o.adds < 1 {
		return errors.New("-policy-pods: want ≥ 0; -policy-count: want ≥ 3; -policy-changes: want ≥ 2; -policy-adds: want ≥ 1")
	}
	return nil
}

// policyResult is the policy phase's measurements.
type policyResult struct {
	requested, pods, policies int
	fit                       string // why pods < requested ("" when all fit)
	selected                  int    // pods with the table after the initial sync
	initialSync               time.Duration
	rules, elements           []int // per selected pod
	rssWithout, rssWith       memory
	toSelf, toAll             dist // per change: to the moved pod's table, to every affected pod's rules
	late                      int  // changes whose rules were not in place within policyWithin
	cpuPerChange              time.Duration
	addSelected, addIdle      dist
}

// policyPod is one running pod of the phase.
type policyPod struct {
	name  string
	netns string // its sandbox's network namespace (multinetd's record)
	group int    // -1: idle
}

// groupName is the label value of group g (-1: idle).
func groupName(g int) string {
	if g < 0 {
		return policyIdle
	}
	return fmt.Sprintf("g%02d", g)
}

// policyFit returns how many pods fit (at most want), and why when fewer:
// the node's pod slots (the kubelet's maxPods less the pods it runs) and
// the free addresses of the default network's host-local subnet
// (POD_CIDR) and of the bench networks' subnets, each less a margin for
// the ADD timing and the cluster's own pods.
func (b *bench) policyFit(ctx context.Context, want int) (int, string, error) {
	const margin = 5
	n, why := want, ""
	node, err := b.c.kube.CoreV1().Nodes().Get(ctx, b.e.node, metav1.GetOptions{})
	if err != nil {
		return 0, "", err
	}
	onNode, err := b.c.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + b.e.node +
		",status.phase!=Succeeded,status.phase!=Failed"})
	if err != nil {
		return 0, "", err
	}
	maxPods := int(node.Status.Allocatable.Pods().Value())
	if f := maxPods - len(onNode.Items) - margin; f < n {
		n, why = f, fmt.Sprintf("node %s takes %d pods (the kubelet's maxPods) and runs %d", b.e.node, maxPods, len(onNode.Items))
	}
	free := func(cidr string, used int) int {
		p, err := netip.ParsePrefix(cidr)
		if err != nil || !p.Addr().Is4() {
			return want + margin
		}
		return 1<<(32-p.Bits()) - 3 - used
	}
	if cidr := os.Getenv("POD_CIDR"); cidr != "" && b.defaultIPAMDir != "" {
		used := len(hostLocalOwned(b.defaultIPAMDir, func(string) bool { return true }))
		if f := free(cidr, used) - margin; f < n {
			n, why = f, fmt.Sprintf("the default network's subnet %s (POD_CIDR) has %d free addresses", cidr, f+margin)
		}
	}
	for _, s := range b.o.subnets {
		if f := free(s, 0) - margin; f < n {
			n, why = f, fmt.Sprintf("the bench network subnet %s (-subnets) holds %d pods", s, f+margin)
		}
	}
	if why != "" {
		why += fmt.Sprintf(", less %d kept free", margin)
	}
	return max(n, 0), why, nil
}

// policyPhase runs the policy phase (see the top of this file).
func (b *bench) policyPhase(ctx context.Context) error {
	r := &b.res.policy
	po := b.o.policy
	r.requested, r.policies = po.pods, po.count
	var err error
	if r.pods, r.fit, err = b.policyFit(ctx, po.pods); err != nil {
		return err
	}
	if r.pods < po.count+policyMovers {
		return fmt.Errorf("policy phase: only %d pods fit (%s); want at least %d", r.pods, r.fit, po.count+policyMovers)
	}
	if r.fit != "" {
		logf("policy: %d of %d pods fit: %s (a local cluster started with POD_CIDR=10.244.0.0/22 KUBELET_MAX_PODS=330 takes 300; docs/bench.md)", r.pods, po.pods, r.fit)
	}
	pods, err := b.policyAttach(ctx, r.pods)
	defer b.policyDetach(context.WithoutCancel(ctx), pods)
	if err != nil {
		return err
	}
	time.Sleep(3 * time.Second)
	if r.rssWithout, err = readMemory(b.pid); err != nil {
		return err
	}
	client, err := mnpclient.NewForConfig(b.c.rest)
	if err != nil {
		return err
	}
	if err := b.createPolicies(ctx, client.MultiNetworkPolicies(b.o.namespace)); err != nil {
		return err
	}
	if err := b.policyInitialSync(pods); err != nil {
		return err
	}
	time.Sleep(3 * time.Second)
	if r.rssWith, err = readMemory(b.pid); err != nil {
		return err
	}
	if err := b.policyChanges(ctx, pods); err != nil {
		return err
	}
	return b.policyAdds(ctx)
}

// policyAttach creates the phase's n pods on the node, at once, and waits
// until each runs with network-status; it finds their network namespaces
// in multinetd's records.
func (b *bench) policyAttach(ctx context.Context, n int) ([]*policyPod, error) {
	count := b.o.policy.count
	pods := make([]*policyPod, n)
	for i := range pods {
		pods[i] = &policyPod{name: fmt.Sprintf("mnp-%03d", i), group: i % count}
		if i >= n-policyMovers {
			pods[i].group = -1
		}
	}
	logf("policy: %d pods running on node %s with both bench networks, %d of them idle", n, b.e.node, policyMovers)
	networks := b.nets[0].name + "," + b.nets[1].name
	err := parallel(n, 10, func(i int) error {
		l := labels()
		l[policyGroupLabel] = groupName(pods[i].group)
		_, err := b.c.kube.CoreV1().Pods(b.o.namespace).Create(ctx, b.c.runningPod(pods[i].name, l, networks), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return pods, fmt.Errorf("policy: create pods: %w", err)
	}
	start := time.Now()
	err = wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := b.c.kube.CoreV1().Pods(b.o.namespace).List(ctx, metav1.ListOptions{LabelSelector: policyGroupLabel})
		if err != nil {
			return false, nil
		}
		running := 0
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning && p.Annotations[status.Annotation] != "" {
				running++
			}
		}
		return running == n, nil
	})
	if err != nil {
		return pods, fmt.Errorf("policy: %d pods not all running with network-status within 5 min: %w", n, err)
	}
	logf("policy: %d pods running in %v", n, time.Since(start).Round(time.Second))
	for _, p := range pods {
		if p.netns, err = b.podNetns(p.name); err != nil {
			return pods, err
		}
	}
	return pods, nil
}

// policyDetach deletes the policies, then the pods, and waits until
// multinetd holds no record of them.
func (b *bench) policyDetach(ctx context.Context, pods []*policyPod) {
	if client, err := mnpclient.NewForConfig(b.c.rest); err == nil {
		err = client.MultiNetworkPolicies(b.o.namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		if err != nil {
			logf("warning: delete the bench policies: %v", err)
		}
	}
	err := parallel(len(pods), 10, func(i int) error {
		return b.c.deletePodAndRecord(ctx, pods[i].name, b.recordsDir())
	})
	if err != nil {
		logf("warning: policy phase: delete pods: %v", err)
	}
}

// benchPolicy is policy k of count (see the top of this file).
const benchPolicy = `
podSelector:
  matchLabels: {%[1]s: g%02[2]d}
policyTypes: [Ingress, Egress]
ingress:
- from:
  - podSelector:
      matchLabels: {%[1]s: g%02[3]d}
  - ipBlock: {cidr: 10.99.%[2]d.0/24, except: [10.99.%[2]d.128/25]}
  ports:
  - {protocol: TCP, port: 8080}
  - {protocol: UDP, port: 5000, endPort: 5100}
egress:
- to:
  - podSelector:
      matchLabels: {%[1]s: g%02[4]d}
  ports:
  - {protocol: TCP, port: 443}
`

// createPolicies creates the phase's policies, for both bench networks.
func (b *bench) createPolicies(ctx context.Context, client mnpclient.MultiNetworkPolicyInterface) error {
	count := b.o.policy.count
	logf("policy: creating %d MultiNetworkPolicies for %s and %s", count, b.nets[0].name, b.nets[1].name)
	for k := range count {
		p := &v1beta2.MultiNetworkPolicy{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("bench-%02d", k), Labels: labels(),
			Annotations: map[string]string{v1beta2.PolicyForAnnotation: b.nets[0].name + "," + b.nets[1].name},
		}}
		spec := fmt.Sprintf(benchPolicy, policyGroupLabel, k, (k+1)%count, (k+2)%count)
		if err := yaml.UnmarshalStrict([]byte(spec), &p.Spec); err != nil {
			return fmt.Errorf("bench policy %d: %w", k, err)
		}
		if _, err := client.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create policy %s: %w", p.Name, err)
		}
	}
	return nil
}

// policyInitialSync waits until every grouped pod has multinetd's table
// and no idle one has, and keeps the time it took and each table's size.
func (b *bench) policyInitialSync(pods []*policyPod) error {
	r := &b.res.policy
	start := time.Now()
	pending := append([]*policyPod(nil), pods...)
	for len(pending) > 0 {
		if time.Since(start) > 2*policyWithin {
			return fmt.Errorf("policy: %d pods without their rules %v after the policies were created (e.g. %s)", len(pending), 2*policyWithin, pending[0].name)
		}
		var next []*policyPod
		for _, p := range pending {
			st, err := readTable(p.netns)
			if err != nil {
				return err
			}
			if st.present != (p.group >= 0) {
				next = append(next, p)
			}
		}
		pending = next
		time.Sleep(20 * time.Millisecond)
	}
	r.initialSync = time.Since(start)
	for _, p := range pods {
		st, err := readTable(p.netns)
		if err != nil {
			return err
		}
		if st.present {
			r.selected++
			r.rules = append(r.rules, st.rules)
			r.elements = append(r.elements, st.elements)
		}
	}
	logf("policy: %d pods selected, rules in place %v after the policies were created", r.selected, r.initialSync.Round(time.Millisecond))
	return nil
}

// patchGroup sets pod name's group label.
func (b *bench) patchGroup(ctx context.Context, name, group string) error {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{policyGroupLabel: group}}})
	_, err := b.c.kube.CoreV1().Pods(b.o.namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// affected returns the pods whose rules name a pod of group k as a peer:
// those of groups k-1 (ingress) and k-2 (egress).
func affected(pods []*policyPod, k, count int) []*policyPod {
	var out []*policyPod
	for _, p := range pods {
		if p.group == (k+count-1)%count || p.group == (k+count-2)%count {
			out = append(out, p)
		}
	}
	return out
}
