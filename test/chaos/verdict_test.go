//go:build chaos

package main

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const bound = 5 * time.Minute

// goodRound is a round as it should go: 22 pods wanted, all Running with
// complete network-status, 6 faults planned and done.
func goodRound() roundResult {
	r := roundResult{round: 1, wanted: 22, running: 22, complete: 22, checked: 22, planned: 6}
	for _, k := range []string{"kill", "kill", "kill", "kubelet", "pause", "corrupt"} {
		r.faults = append(r.faults, fault{kind: k, phase: "up", at: 0.5, done: true, msg: "done"})
	}
	return r
}

func TestVerdictPassesAGoodRound(t *testing.T) {
	if got := verdict([]roundResult{goodRound()}, bound, 0); got != nil {
		t.Fatalf("verdict = %q, want PASS (nil)", got)
	}
}

// The old report said PASS here: no leak and no incomplete pod among the
// Running ones, because no pod was Running.
func TestVerdictFailsWhenNoPodReachedRunning(t *testing.T) {
	r := goodRound()
	r.running, r.complete, r.checked = 0, 0, 0
	got := verdict([]roundResult{r}, bound, 0)
	want := "round 1: 0 of 22 pods wanted Running with complete network-status within 5m0s after the last fault (0 Running)"
	if len(got) != 1 || got[0] != want {
		t.Fatalf("verdict = %q, want [%q]", got, want)
	}
}

func TestVerdictFailsWhenSomePodsAreMissing(t *testing.T) {
	for name, mod := range map[string]func(*roundResult){
		"one pod not Running":                     func(r *roundResult) { r.running, r.complete = 21, 21 },
		"one Running pod without complete status": func(r *roundResult) { r.complete = 21 },
		"one pod with incomplete interfaces":      func(r *roundResult) { r.incomplete = []string{"chaos-x: eth0 mac"} },
	} {
		t.Run(name, func(t *testing.T) {
			r := goodRound()
			mod(&r)
			if got := verdict([]roundResult{goodRound(), r}, bound, 0); len(got) != 1 || !strings.HasPrefix(got[0], "round 1:") {
				t.Fatalf("verdict = %q, want one problem of round 1", got)
			}
		})
	}
}

// The old code logged "NOT KILLED" and counted the kill.
func TestVerdictFailsOnAFaultThatDidNotHappen(t *testing.T) {
	r := goodRound()
	r.faults[1] = fault{kind: "kill", phase: "down", at: 0.4, msg: "NOT KILLED: no running multinetd within 6m0s"}
	got := verdict([]roundResult{r}, bound, 0)
	want := []string{
		"round 1: 1 of 6 faults planned did not happen",
		"round 1: fault did not happen: kill@down:40%: NOT KILLED: no running multinetd within 6m0s",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("verdict = %q, want %q", got, want)
	}
	if r.kills() != 2 {
		t.Errorf("kills() = %d, want 2 (the one not done is not counted)", r.kills())
	}
}

func TestVerdictFailsOnAFaultNeverFired(t *testing.T) {
	r := goodRound()
	r.faults = r.faults[:5]
	if got := verdict([]roundResult{r}, bound, 0); len(got) != 1 || got[0] != "round 1: 1 of 6 faults planned did not happen" {
		t.Fatalf("verdict = %q", got)
	}
}

func TestVerdictFailsOnLeftovers(t *testing.T) {
	if got := verdict([]roundResult{goodRound()}, bound, 3); len(got) != 1 || !strings.HasPrefix(got[0], "3 left") {
		t.Fatalf("verdict = %q, want one problem: 3 left", got)
	}
}

func TestRoundRowCountsWantedRunningCompleteAndFaults(t *testing.T) {
	r := goodRound()
	r.running, r.complete = 20, 19
	r.faults[0].done = false
	got := roundRow(r)
	want := "| 1 | 22 | 20 | 19 | 6 | 5 |"
	if !strings.HasPrefix(got, want) {
		t.Fatalf("roundRow = %q, want it to begin %q (round, wanted, Running, complete, planned, done)", got, want)
	}
	if cols, hcols := strings.Count(got, "|"), strings.Count(strings.SplitN(roundHeader, "\n", 2)[0], "|"); cols != hcols {
		t.Errorf("row has %d columns' bars, header %d", cols, hcols)
	}
}

const ns = "chaos-ns"

func pod(name, networks, netStatus string, phase corev1.PodPhase) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{
		"k8s.v1.cni.cncf.io/networks": networks}}, Status: corev1.PodStatus{Phase: phase}}
	if netStatus != "" {
		p.Annotations["k8s.v1.cni.cncf.io/network-status"] = netStatus
	}
	return p
}

const (
	eth0 = `{"name":"containerd-net","interface":"eth0","ips":["10.88.0.5"],"mac":"02:00:00:00:00:01","default":true}`
	netA = `{"name":"chaos-ns/net-a","interface":"net1","ips":["10.213.1.5"],"mac":"02:00:00:00:00:02"}`
	netB = `{"name":"chaos-ns/net-b","interface":"net2","ips":["10.213.2.5"],"mac":"02:00:00:00:00:03"}`
)

func TestCountPods(t *testing.T) {
	deleting := pod("deleting", "net-a", "["+eth0+","+netA+"]", corev1.PodRunning)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	pods := []corev1.Pod{
		pod("complete", "net-a,net-b", "["+eth0+","+netA+","+netB+"]", corev1.PodRunning),
		pod("net-b-missing", "net-a,net-b", "["+eth0+","+netA+"]", corev1.PodRunning),
		pod("no-status", "net-a", "", corev1.PodRunning),
		pod("pending", "net-a", "", corev1.PodPending),
		deleting,
	}
	c := countPods(pods)
	if c.running != 3 || c.complete != 1 {
		t.Fatalf("running %d complete %d, want 3 and 1", c.running, c.complete)
	}
	if strings.Join(c.notRunning, ",") != "pending: ContainerCreating,deleting: Terminating" {
		t.Errorf("notRunning = %q", c.notRunning)
	}
	want := "net-b-missing: network-status has 2 entries, want 3"
	if len(c.notComplete) != 2 || !strings.HasPrefix(c.notComplete[0], want) || c.notComplete[1] != "no-status: no network-status" {
		t.Fatalf("notComplete = %q", c.notComplete)
	}
}

func TestStatusProblem(t *testing.T) {
	nets := []string{"chaos-ns/net-a", "chaos-ns/net-b"}
	for _, tc := range []struct{ name, raw, want string }{
		{"complete", "[" + eth0 + "," + netA + "," + netB + "]", ""},
		{"absent", "", "no network-status"},
		{"garbage", "{", "network-status: "},
		{"a network missing", "[" + eth0 + "," + netA + "]", "network-status has 2 entries, want 3"},
		{"out of order", "[" + eth0 + "," + netB + "," + netA + "]", "network-status[1] = chaos-ns/net-b/net2"},
		{"no IP", "[" + eth0 + "," + netA + "," + strings.Replace(netB, `"ips":["10.213.2.5"],`, "", 1) + "]", "network-status[2] = "},
		{"no default", "[" + strings.Replace(eth0, `,"default":true`, "", 1) + "," + netA + "," + netB + "]", "network-status[0] = "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, got := statusProblem(tc.raw, nets)
			if (tc.want == "") != (got == "") || !strings.HasPrefix(got, tc.want) {
				t.Fatalf("statusProblem = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRequestedNetworks(t *testing.T) {
	p := pod("p", "net-a, other/net-x@data0", "", corev1.PodRunning)
	got, err := requestedNetworks(&p)
	if err != nil || strings.Join(got, ",") != "chaos-ns/net-a,other/net-x" {
		t.Fatalf("requestedNetworks = %q, %v", got, err)
	}
	p = pod("p", "[{", "", corev1.PodRunning)
	if _, err := requestedNetworks(&p); err == nil {
		t.Fatal("requestedNetworks of a bad annotation: no error")
	}
}

// The old code logged "no device pool" and ran without device pods.
func TestDevicePoolMissingIsAnError(t *testing.T) {
	_, _, err := devicePool(2, nil, errors.New("open devices.env: no such file or directory"))
	if err == nil || !strings.Contains(err.Error(), "-device-pods 2: no device pool") || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("err = %v, want the missing pool named with its cause", err)
	}
	if _, _, err := devicePool(2, map[string]string{}, nil); err == nil {
		t.Fatal("an empty devices.env: no error")
	}
	if _, _, err := devicePool(3, map[string]string{"NETDEV_RESOURCE": "r", "NETDEV_DEVICES": "mnv0,mnv1"}, nil); err == nil {
		t.Fatal("3 device pods on 2 devices: no error")
	}
}

func TestDevicePool(t *testing.T) {
	res, devs, err := devicePool(2, map[string]string{"NETDEV_RESOURCE": "multinet.io/netdev", "NETDEV_DEVICES": "mnv0,mnv1"}, nil)
	if err != nil || res != "multinet.io/netdev" || strings.Join(devs, ",") != "mnv0,mnv1" {
		t.Fatalf("devicePool = %q %q %v", res, devs, err)
	}
	if _, _, err := devicePool(0, nil, errors.New("absent")); err != nil {
		t.Fatalf("-device-pods 0 needs no pool: %v", err)
	}
}

// Every fault fired is recorded, and one that could not be done is
// recorded as not done (fire's error path).
func TestExecutorRecordsEveryFault(t *testing.T) {
	s := &suite{}
	x := s.newExecutor()
	evs := []*event{{kind: "nonesuch", phase: "up", at: 0.2}, {kind: "nonesuch", phase: "up", at: 0.8}, {kind: "nonesuch", phase: "down", at: 0.5}}
	x.trigger(evs, "up", 0.5)
	if allFired(evs, "up") {
		t.Fatal("allFired(up) before 80%")
	}
	x.trigger(evs, "up", 1.1)
	x.trigger(evs, "down", 1.1)
	faults := x.done()
	close(x.ch)
	if !x.idle() || len(faults) != 3 {
		t.Fatalf("idle %v, %d faults, want idle and 3", x.idle(), len(faults))
	}
	for _, f := range faults {
		if f.done || !strings.Contains(f.msg, `NOT DONE: unknown fault "nonesuch"`) {
			t.Errorf("fault %s: done %v", f, f.done)
		}
	}
	if s.boundFrom(time.Time{}) != s.lastFault || s.lastFault.IsZero() {
		t.Errorf("boundFrom = %v, want the end of the last fault %v", s.boundFrom(time.Time{}), s.lastFault)
	}
	if later := time.Now().Add(time.Hour); !s.boundFrom(later).Equal(later) {
		t.Errorf("boundFrom(a scale-up after the last fault) = %v, want its start", s.boundFrom(later))
	}
}

func TestPIDReplaced(t *testing.T) {
	if err := pidReplaced("kubelet", 100, 200, nil); err != nil {
		t.Fatalf("a new pid: %v", err)
	}
	if err := pidReplaced("kubelet", 100, 100, nil); err == nil || !strings.Contains(err.Error(), "not restarted") {
		t.Fatalf("the same pid: err = %v", err)
	}
	if err := pidReplaced("kubelet", 100, 0, errors.New("kubelet (pid 200) is not running")); err == nil || !strings.Contains(err.Error(), "pid 200") {
		t.Fatalf("not running after: err = %v", err)
	}
}

func TestGone(t *testing.T) {
	if !gone(1<<30, time.Second) {
		t.Fatal("a PID that does not exist is not gone")
	}
	if gone(os.Getpid(), 200*time.Millisecond) {
		t.Fatal("this process is gone")
	}
}
