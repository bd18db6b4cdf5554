//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"
)

// TestMultusDefaultNetworks: multinetd's defaultNetworks
// and systemNamespaces, Multus's keys. The deployed multinetd's ConfigMap is
// patched (defaultNetworks: a NAD of a namespace of its own;
// systemNamespaces: the shipped ones plus a fresh namespace) and multinetd
// restarted; both are restored when the test ends. Then:
//   - a pod of an ordinary namespace selecting its own NAD gets the default
//     network on eth0, the operator's network on net1 (although namespace
//     isolation, on as deployed, would refuse the pod selecting it), its own
//     on net2, in that order in network-status;
//   - the same pod without a selection gets eth0 and net1;
//   - a pod of the system namespace gets no defaultNetworks: with a
//     selection, eth0 and its own network on net1 (Multus skips only
//     defaultNetworks there); without one, eth0 only;
//   - deleting the pods releases every address and bridge port.
func TestMultusDefaultNetworks(t *testing.T) {
	requireDeployed(t)
	ops, app, sys := newNamespace(t), newNamespace(t), newNamespace(t)
	side := bridgeNet(t, ops, "side", "1.0.0", nil)
	appNet := bridgeNet(t, app, "mine", "1.0.0", nil)
	sysNet := bridgeNet(t, sys, "mine", "1.0.0", nil)

	patchDaemonConfig(t, map[string]any{
		"defaultNetworks":  []string{ops + "/side"},
		"systemNamespaces": []string{"kube-system", systemNamespace, sys},
	})

	cases := []struct {
		name, ns, networks string
		want               []string // network-status names after eth0
		ifs                []string
	}{
		{name: "selection", ns: app, networks: "mine", want: []string{ops + "/side", app + "/mine"}, ifs: []string{"eth0", "net1", "net2"}},
		{name: "no-selection", ns: app, want: []string{ops + "/side"}, ifs: []string{"eth0", "net1"}},
		{name: "system-selection", ns: sys, networks: "mine", want: []string{sys + "/mine"}, ifs: []string{"eth0", "net1"}},
		{name: "system-no-selection", ns: sys, ifs: []string{"eth0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := runPod(t, podSpec(c.ns, "defaults-"+c.name, c.networks))
			list := checkStatusMatchesPod(t, p, c.ifs)
			var got []string
			for _, s := range list[1:] {
				got = append(got, s.Name)
			}
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("network-status after the default network lists %q, want %q", got, c.want)
			}
			for i, s := range list[1:] {
				net := map[string]*testNet{ops + "/side": side, app + "/mine": appNet, sys + "/mine": sysNet}[s.Name]
				if net == nil || len(s.IPs) != 1 || !strings.HasPrefix(s.IPs[0], strings.TrimSuffix(net.Subnet, "0/24")) {
					t.Errorf("network-status[%d] %s: ips %q, want one address of the network's subnet", i+1, s.Name, s.IPs)
				}
			}
			deletePod(t, c.ns, p.Name)
		})
	}
	assertReleased(t, side, appNet, sysNet)
}

// patchDaemonConfig sets keys in the deployed multinetd's configuration
// (multinetd.yaml of the ConfigMap its DaemonSet mounts as "config") and
// restarts multinetd; when the test ends it puts the file back as it was and
// restarts multinetd again.
func patchDaemonConfig(t *testing.T, keys map[string]any) {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	ds, err := testCluster.kube.AppsV1().DaemonSets(systemNamespace).Get(ctx, "multinetd", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("multinetd DaemonSet: %v", err)
	}
	cmName := ""
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.Name == "config" && v.ConfigMap != nil {
			cmName = v.ConfigMap.Name
		}
	}
	cms := testCluster.kube.CoreV1().ConfigMaps(systemNamespace)
	cm, err := cms.Get(ctx, cmName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("multinetd's ConfigMap %q: %v", cmName, err)
	}
	const key = "multinetd.yaml"
	original, ok := cm.Data[key]
	if !ok {
		t.Fatalf("ConfigMap %s has no %s", cmName, key)
	}
	cfg := map[string]any{}
	if err := yaml.Unmarshal([]byte(original), &cfg); err != nil {
		t.Fatalf("%s of ConfigMap %s: %v", key, cmName, err)
	}
	for k, v := range keys {
		cfg[k] = v
	}
	patched, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}

	setData := func(ctx context.Context, value string) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cm, err := cms.Get(ctx, cmName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cm.Data[key] = value
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
			return err
		})
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := setData(ctx, original); err != nil {
			t.Errorf("restore %s of ConfigMap %s: %v (the cluster's multinetd keeps the test's configuration: hack/cluster-deployed.sh apply)", key, cmName, err)
			return
		}
		restartDaemon(t)
		t.Logf("restored %s of ConfigMap %s and restarted multinetd", key, cmName)
	})
	if err := setData(ctx, string(patched)); err != nil {
		t.Fatalf("patch %s of ConfigMap %s: %v", key, cmName, err)
	}
	t.Logf("multinetd.yaml of ConfigMap %s now:\n%s", cmName, patched)
	restartDaemon(t)
	requireDaemonConfig(t, keys)
}

// requireDaemonConfig fails the test unless the running multinetd started
// with the patched keys: its start-up log line names defaultNetworks.
func requireDaemonConfig(t *testing.T, keys map[string]any) {
	t.Helper()
	nets, _ := keys["defaultNetworks"].([]string)
	if len(nets) == 0 {
		return
	}
	p := runningPod(t, "multinetd")
	logs := podLogs(t, p)
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "gets defaultNetworks") && strings.Contains(line, nets[0]) {
			return
		}
	}
	t.Fatalf("multinetd pod %s did not start with defaultNetworks %q (the kubelet served the old ConfigMap?); its log:\n%s", p.Name, nets, logs)
}
