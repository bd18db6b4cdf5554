package main

import (
	"fmt"
	"slices"
)

// policyRows adds the policy phase's rows to the main table (row: measure,
// multinet, direct / reference, Multus, target), when the phase ran.
func (r *policyResult) rows(row func(cells ...string)) {
	if r.pods == 0 {
		return
	}
	pods := fmt.Sprintf("%d pods", r.pods)
	if r.fit != "" {
		pods = fmt.Sprintf("%d of the %d pods asked (%s)", r.pods, r.requested, r.fit)
	}
	row(fmt.Sprintf("policy: %s on 2 networks, %d MultiNetworkPolicies; policies created → every selected pod's rules in place", pods, r.policies),
		fmt.Sprintf("%s (%d pods selected)", secs(r.initialSync), r.selected), "", "", "")
	n := len(r.toSelf)
	row(fmt.Sprintf("policy: label change → the moved pod's rules in place (ms, %d changes)", n), r.toSelf.triple(), "", "", "p99 ≤ 1 s")
	late := ""
	if r.late > 0 {
		late = fmt.Sprintf("; %d changes not in place within %v", r.late, policyWithin)
	}
	row(fmt.Sprintf("policy: label change → every affected pod's rules in place (ms, %d changes)", n), r.toAll.triple()+late, "", "", "p99 ≤ 1 s")
	row("policy: multinetd CPU time per label change (ms, idle rate taken out)", ms(r.cpuPerChange), "", "", "")
	row("policy: rules / set elements per selected pod (mean, max)",
		fmt.Sprintf("%s, %d / %s, %d", meanInt(r.rules), slices.Max(append(r.rules, 0)), meanInt(r.elements), slices.Max(append(r.elements, 0))), "", "", "")
	row(fmt.Sprintf("policy: multinetd RSS with the %d pods, without → with the policies", r.pods),
		r.rssWithout.String()+" → "+r.rssWith.String(), "", "", "")
	row("policy: ADD latency of a selected pod (ms) / of an unselected one", r.addSelected.triple(), r.addIdle.triple()+" (unselected)", "", "")
	row("policy: ADD p50 selected × unselected", ratio(r.addSelected.median(), r.addIdle.median()), "", "", "≤ 1.1×")
}

// meanInt formats the mean of v with one decimal ("n/a" when empty).
func meanInt(v []int) string {
	if len(v) == 0 {
		return "n/a"
	}
	sum := 0
	for _, x := range v {
		sum += x
	}
	return fmt.Sprintf("%.1f", float64(sum)/float64(len(v)))
}

// policyLegend describes the policy rows (markdown's "Rows:" list).
const policyLegend = `- policy (-policy-pods, -policy-count, -policy-changes, -policy-adds; hack/tools/bench/policy.go): pods running on
  the node (busybox; the kubelet makes their sandboxes through multinet) on both bench networks, made ten at a time;
  as many as the node takes (the kubelet's maxPods less the pods it runs) and the default network's subnet
  (POD_CIDR) and the bench subnets hold, less 5 each. Real pods, not the other phases' rejected ones: multinetd's
  peers are the pods that have not finished. Pod i is in group i mod -policy-count; the last 10 start idle.
  Policy k, for both networks, selects group k, allows ingress from group k+1 and an ipBlock with an except on TCP
  8080 and UDP 5000-5100, and egress to group k+2 on TCP 443. "Rules in place" is read from the pods' network
  namespaces (multinetd's nftables table, through netlink): present in every grouped pod and in no idle one after the
  policies are created; for a label change (an idle pod moved into group k, or back), from just before the label
  PATCH until the moved pod's table is there (or gone), and until the table of every pod of groups k-1 and k-2
  (whose rules name group k) changed, polled every 5 ms (the polling runs in the bench, beside multinetd). CPU:
  multinetd's utime + stime over the changes, less its idle rate over 5 s before them, per change. Rules and set
  elements: of each selected pod's table after the initial sync. RSS: VmRSS with the pods running, before the
  policies and 3 s after the initial sync. ADD of a selected pod (group 0) and of an unselected one (idle),
  alternated, each on a fresh sandbox of a rejected pod as the ADD/DEL rows (multinetd reads such a pod with one
  GET, both kinds alike, since its peer view leaves out finished pods).
`
