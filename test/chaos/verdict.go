//go:build chaos

package main

// The verdict of a run, kept free of I/O so that it has unit tests
// (verdict_test.go): what a round counts, which faults happened, and why a
// run fails.

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/pkg/spec/selection"
	"github.com/multinet/multinet/pkg/spec/status"
)

// fault is one injected fault of a round as it went: done is false when it
// did not happen (multinetd not killed, API server not paused, ...).
type fault struct {
	kind, phase string
	at          float64
	done        bool
	msg         string
}

func (f fault) String() string {
	return fmt.Sprintf("%s@%s:%.0f%%: %s", f.kind, f.phase, f.at*100, f.msg)
}

// roundResult is what one round counted.
type roundResult struct {
	round            int
	upTime, downTime time.Duration
	// After the scale-up, at the end of the wait: pods wanted (replicas of
	// both Deployments), pods Running, and Running pods whose network-status
	// lists every network they request.
	wanted, running, complete int
	notComplete               []string // pod: why, of the Running ones
	notRunning                []string // pod: state, of the others
	checked                   int      // Running pods whose interfaces were checked
	incomplete                []string // of those, the ones whose interfaces did not match
	planned                   int      // faults planned
	faults                    []fault  // faults fired, in order
}

// faultsDone counts the faults that happened.
func (r roundResult) faultsDone() int {
	n := 0
	for _, f := range r.faults {
		if f.done {
			n++
		}
	}
	return n
}

// kills counts the multinetd SIGKILLs that happened.
func (r roundResult) kills() int {
	n := 0
	for _, f := range r.faults {
		if f.done && f.kind == "kill" {
			n++
		}
	}
	return n
}

// problems says why the round fails, nil when it passes: a pod wanted that
// was not Running with complete network-status within bound after the last
// fault, a Running pod whose interfaces did not match, or a fault that did
// not happen.
func (r roundResult) problems(bound time.Duration) []string {
	var out []string
	if r.complete < r.wanted {
		out = append(out, fmt.Sprintf("round %d: %d of %d pods wanted Running with complete network-status within %v after the last fault (%d Running)",
			r.round, r.complete, r.wanted, bound, r.running))
	}
	if len(r.incomplete) > 0 {
		out = append(out, fmt.Sprintf("round %d: %d of %d Running pods checked had incomplete interfaces", r.round, len(r.incomplete), r.checked))
	}
	if done := r.faultsDone(); done < r.planned {
		out = append(out, fmt.Sprintf("round %d: %d of %d faults planned did not happen", r.round, r.planned-done, r.planned))
	}
	for _, f := range r.faults {
		if !f.done {
			out = append(out, fmt.Sprintf("round %d: fault did not happen: %s", r.round, f))
		}
	}
	return out
}

// verdict says why the run fails, nil when it passes: any round's
// problems, and anything left after the last round.
func verdict(rounds []roundResult, bound time.Duration, left int) []string {
	var out []string
	for _, r := range rounds {
		out = append(out, r.problems(bound)...)
	}
	if left > 0 {
		out = append(out, fmt.Sprintf("%d left after the last round (leases, veths, records, ... above)", left))
	}
	return out
}

// podCounts are the pods of a scale-up at one moment.
type podCounts struct {
	running, complete int
	notComplete       []string // "pod: why", Running pods only
	notRunning        []string // "pod: state"
}

// countPods counts the Running pods and, of those, the ones whose
// network-status lists every network they request.
func countPods(pods []corev1.Pod) podCounts {
	var c podCounts
	for i := range pods {
		p := &pods[i]
		if !running(p) {
			c.notRunning = append(c.notRunning, p.Name+": "+podState(p))
			continue
		}
		c.running++
		if why := podStatusProblem(p); why != "" {
			c.notComplete = append(c.notComplete, p.Name+": "+why)
			continue
		}
		c.complete++
	}
	return c
}

// podState is what kubectl get pods shows as the pod's status, roughly:
// Terminating, a container's waiting reason, ContainerCreating for a
// Pending pod without one, or the phase.
func podState(p *corev1.Pod) string {
	if p.DeletionTimestamp != nil {
		return "Terminating"
	}
	st := string(p.Status.Phase)
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Waiting != nil {
			st = cs.State.Waiting.Reason
		}
	}
	if p.Status.Phase == corev1.PodPending && st == string(corev1.PodPending) {
		st = "ContainerCreating"
	}
	return st
}

// podStatusProblem says why the pod's network-status is not complete, ""
// when it lists every network the pod requests.
func podStatusProblem(p *corev1.Pod) string {
	nets, err := requestedNetworks(p)
	if err != nil {
		return err.Error()
	}
	_, why := statusProblem(p.Annotations[status.Annotation], nets)
	return why
}

// requestedNetworks returns "namespace/name" of each network the pod's
// networks annotation selects, in order.
func requestedNetworks(p *corev1.Pod) ([]string, error) {
	elems, err := selection.Parse(p.Annotations[nadv1.NetworksAnnotation], p.Namespace)
	if err != nil {
		return nil, fmt.Errorf("networks annotation: %w", err)
	}
	out := make([]string, 0, len(elems))
	for _, e := range elems {
		out = append(out, e.Namespace+"/"+e.Name)
	}
	return out, nil
}

// statusProblem decodes a network-status annotation and says why it is not
// complete ("" when it is): it must list the default network on eth0, then
// each of nets ("namespace/name") in order on net1, net2, ..., each with an
// IP and a MAC.
func statusProblem(raw string, nets []string) ([]status.NetworkStatus, string) {
	if raw == "" {
		return nil, "no network-status"
	}
	list, err := status.Decode(raw)
	if err != nil {
		return nil, "network-status: " + err.Error()
	}
	if len(list) != len(nets)+1 {
		return list, fmt.Sprintf("network-status has %d entries, want %d: %s", len(list), len(nets)+1, raw)
	}
	for i, st := range list {
		wantIf, wantNet := "eth0", ""
		if i > 0 {
			wantIf, wantNet = fmt.Sprintf("net%d", i), nets[i-1]
		}
		if st.Interface != wantIf || (i > 0 && st.Name != wantNet) || st.Default != (i == 0) || len(st.IPs) == 0 || st.Mac == "" {
			return list, fmt.Sprintf("network-status[%d] = %s/%s default=%v ips=%v mac=%q, want interface %s of %q",
				i, st.Name, st.Interface, st.Default, st.IPs, st.Mac, wantIf, wantNet)
		}
	}
	return list, ""
}

// devicePool reads the netdev pool of hack/cluster-devices.sh from its
// devices.env (env, or readErr when it could not be read). Device pods
// without their pool are an error, not dropped: the run would otherwise
// pass without what it claims to exercise.
func devicePool(devicePods int, env map[string]string, readErr error) (resource string, devices []string, err error) {
	if devicePods == 0 {
		return "", nil, nil
	}
	if readErr != nil {
		return "", nil, fmt.Errorf("-device-pods %d: no device pool (hack/cluster-devices.sh up makes it; -device-pods 0 runs without device pods): %w", devicePods, readErr)
	}
	resource = env["NETDEV_RESOURCE"]
	if resource == "" || env["NETDEV_DEVICES"] == "" {
		return "", nil, fmt.Errorf("-device-pods %d: devices.env sets no NETDEV_RESOURCE or NETDEV_DEVICES", devicePods)
	}
	devices = strings.Split(env["NETDEV_DEVICES"], ",")
	if devicePods > len(devices) {
		return "", nil, fmt.Errorf("-device-pods %d: the netdev pool has %d devices", devicePods, len(devices))
	}
	return resource, devices, nil
}

// roundRow is the round's line of the summary table (roundHeader).
func roundRow(r roundResult) string {
	return fmt.Sprintf("| %d | %d | %d | %d | %d | %d | %.0fs | %d | %d | %.0fs | %d |",
		r.round, r.wanted, r.running, r.complete, r.planned, r.faultsDone(),
		r.upTime.Seconds(), r.checked, len(r.incomplete), r.downTime.Seconds(), r.kills())
}

const roundHeader = "| round | pods wanted | reached Running | complete network-status | faults planned | faults done | scale-up | checked | incomplete interfaces | scale-down | multinetd kills |\n" +
	"|---|---|---|---|---|---|---|---|---|---|---|"

// pidReplaced checks that a restart happened: the component runs again
// (afterErr nil) under another PID.
func pidReplaced(name string, before, after int, afterErr error) error {
	if afterErr != nil {
		return fmt.Errorf("%s (pid %d before) not running after the restart: %w", name, before, afterErr)
	}
	if after == before {
		return fmt.Errorf("%s still runs as pid %d: it was not restarted", name, before)
	}
	return nil
}
