package lib_test

import (
	"strings"
	"testing"
)

// TestNodesLayout: nodes.sh gives node K the address 10.249.0.K on the
// underlay and the K-th /24 of POD_CIDR, and its preflight refuses what a
// multi-node cluster cannot run with, saying why; NODES=1 passes whatever
// the other settings.
func TestNodesLayout(t *testing.T) {
	out, ok := sourceAndRun(t, []string{"POD_CIDR=10.244.0.0/24", "NODE_IP=10.249.0.1"},
		". ./nodes.sh && echo $(extra_node_name 3) $(extra_node_ip 3) $(node_pod_cidr 1) $(node_pod_cidr 3) $(extra_node_netdevs 2) $(extra_node_netdevs 3) $(extra_node_netdevs 4)")
	if want := "multinet-node3 10.249.0.3 10.244.0.0/24 10.244.2.0/24 2 1 2"; !ok || strings.TrimSpace(out) != want {
		t.Errorf("layout: %q (ok %v), want %q", out, ok, want)
	}
	for _, tc := range []struct {
		env  []string
		want string // "" = accepted
	}{
		{[]string{"NODES=1", "MULTINET_DEPLOY=host", "POD_CIDR=10.244.0.0/16"}, ""},
		{[]string{"NODES=3"}, ""},
		{[]string{"NODES=3", "MULTINET_DEPLOY=host"}, "MULTINET_DEPLOY=manifests"},
		{[]string{"NODES=3", "MULTINET_CNI=bridge"}, "MULTINET_CNI=multinet"},
		{[]string{"NODES=3", "POD_CIDR=10.244.0.0/16"}, "/24 POD_CIDR"},
		{[]string{"NODES=10"}, "want 1 to 9"},
		{[]string{"NODES=two"}, "want 1 to 9"},
	} {
		out, ok := sourceAndRun(t, tc.env, ". ./nodes.sh && nodes_preflight")
		if tc.want == "" && !ok {
			t.Errorf("%v: refused: %s", tc.env, out)
		}
		if tc.want != "" && (ok || !strings.Contains(out, tc.want)) {
			t.Errorf("%v: accepted %v, output %q; want a refusal saying %q", tc.env, ok, out, tc.want)
		}
	}
}
