package main

import (
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/multinet/multinet/api/k8s.cni.cncf.io/v1beta2"
)

// TestBenchPolicies: every bench policy is a valid v1beta2 spec (strict
// YAML) that selects group k, allows ingress from group k+1 and egress to
// group k+2 (wrapping), and affected names exactly the pods of groups k-1
// and k-2, whose rules name a pod moved into group k.
func TestBenchPolicies(t *testing.T) {
	const count = 50
	for _, k := range []int{0, 1, 48, 49} {
		var spec v1beta2.MultiNetworkPolicySpec
		if err := yaml.UnmarshalStrict([]byte(fmt.Sprintf(benchPolicy, policyGroupLabel, k, (k+1)%count, (k+2)%count)), &spec); err != nil {
			t.Fatalf("policy %d: %v", k, err)
		}
		group := func(sel map[string]string) string { return sel[policyGroupLabel] }
		if got := group(spec.PodSelector.MatchLabels); got != groupName(k) {
			t.Errorf("policy %d selects %q, want %q", k, got, groupName(k))
		}
		if got := group(spec.Ingress[0].From[0].PodSelector.MatchLabels); got != groupName((k+1)%count) {
			t.Errorf("policy %d: ingress from %q, want %q", k, got, groupName((k+1)%count))
		}
		if got := group(spec.Egress[0].To[0].PodSelector.MatchLabels); got != groupName((k+2)%count) {
			t.Errorf("policy %d: egress to %q, want %q", k, got, groupName((k+2)%count))
		}
		if p := spec.Ingress[0].Ports[1]; p.EndPort == nil || *p.EndPort != 5100 || len(spec.PolicyTypes) != 2 {
			t.Errorf("policy %d: UDP range or policyTypes lost: %+v, %v", k, p, spec.PolicyTypes)
		}
	}
	var pods []*policyPod
	for i := range 2*count + 3 {
		g := i % count
		if i >= 2*count {
			g = -1
		}
		pods = append(pods, &policyPod{group: g})
	}
	got := affected(pods, 1, count)
	var groups []string
	for _, p := range got {
		groups = append(groups, groupName(p.group))
	}
	if want := "g00 g49 g00 g49"; strings.Join(groups, " ") != want {
		t.Errorf("affected by group 1: %v, want %s", groups, want)
	}
}

// TestPolicyRows: the policy rows say how many pods ran and why fewer than
// asked, print a percentile only where the sample supports it, and a late
// change fails the run.
func TestPolicyRows(t *testing.T) {
	r := &results{policy: policyResult{requested: 300, pods: 230, policies: 50, fit: "the default network's subnet is full",
		toSelf: rampDist(100), toAll: rampDist(20), rules: []int{10, 14}, elements: []int{3, 5},
		addSelected: rampDist(100), addIdle: rampDist(100), late: 1}}
	var b strings.Builder
	r.policy.rows(func(cells ...string) { b.WriteString("| " + strings.Join(cells, " | ") + " |\n") })
	out := b.String()
	for _, want := range []string{
		"230 of the 300 pods asked (the default network's subnet is full)",
		"the moved pod's rules in place (ms, 100 changes) | p50 50.0 / p90 90.0 / p99 99.0 (n 100)",
		"every affected pod's rules in place (ms, 100 changes) | p50 10.0 / p90 18.0 / max 20.0 (n 20); 1 changes not in place",
		"| 12.0, 14 / 4.0, 5 |",
		"ADD p50 selected × unselected | 1.00×",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("rows lack %q:\n%s", want, out)
		}
	}
	if f := strings.Join(r.failures(), "; "); !strings.Contains(f, "1 label changes without their rules in place") {
		t.Errorf("failures() = %q, want the late change", f)
	}
	var empty policyResult
	empty.rows(func(...string) { t.Error("a phase that did not run has rows") })
}
