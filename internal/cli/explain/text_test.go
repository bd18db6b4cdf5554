package explain

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/pkg/spec/selection"
)

func TestWriteText(t *testing.T) {
	s := newStore(nad("ns1", "net-a", macConf, map[string]string{nadv1.ResourceNameAnnotation: "example.com/pool", "multinet.io/accept-cni-args": "true"}))
	p := pod("ns1", "web", map[string]string{
		selection.NetworksAnnotation: "[\n  {\"name\":\"net-a\",\"mac\":\"02:00:00:00:00:01\",\"cni-args\":{\"x\":1}},\n  {\"name\":\"gone\"}\n]",
		"k8s.v1.cni.cncf.io/network-status": `[{"name":"default-net","interface":"eth0","ips":["10.0.0.2"],"mac":"02:00:00:00:00:09","default":true},` +
			`{"name":"ns1/net-a","interface":"net1","mac":"02:00:00:00:00:01"}]`,
	})
	p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"example.com/pool": resource.MustParse("1")}
	x := explainOK(t, p, s, Options{})
	var b strings.Builder
	if err := WriteText(&b, x); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{
		"Pod:       ns1/web\nNode:      node-a\n",
		`Networks:  [ {"name":"net-a","mac":"02:00:00:00:00:01","cni-args":{"x":1}}, {"name":"gone"} ]` + "\n",
		"Attachments:\n  [0] ns1/net-a -> net1: OK\n",
		"      NAD:           config from spec.config, resourceName example.com/pool\n",
		"      plugins:       bridge, tuning (runtimeConfig mac)\n",
		`      runtimeConfig: {"mac":"02:00:00:00:00:01"}` + "\n",
		`      args.cni:      {"x":1}` + "\n",
		`      config:        {"cniVersion":"1.0.0","name":"net-a","plugins":[{"args":{"cni":{"keep":"yes","over":"nad","x":1}},"bridge":"br-a","type":"bridge"},`,
		"      status:        net1  ns1/net-a  mac 02:00:00:00:00:01\n",
		"      note:          deviceID: device 1 of resource example.com/pool",
		"  [1] ns1/gone -> net2: FAIL\n      error:         metadata.annotations[\"k8s.v1.cni.cncf.io/networks\"]: networks[1] \"gone\": NetworkAttachmentDefinition ns1/gone not found (spec §3.4.1)",
		"Notes:\n  - namespace isolation not checked",
		"Network status:\n  eth0  default-net  ips 10.0.0.2  mac 02:00:00:00:00:09    default\n  net1  ns1/net-a                  mac 02:00:00:00:00:01\n",
		"Result:    FAIL: 1 of 2 attachment(s) would fail, so multinetd fails the pod's network setup\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}

	x = explainOK(t, pod("ns1", "plain", nil), newStore(), Options{})
	b.Reset()
	if err := WriteText(&b, x); err != nil {
		t.Fatal(err)
	}
	want := "Pod:       ns1/plain\nNode:      node-a\nNetworks:  <none>\nNotes:\n" +
		"  - namespace isolation not checked: pass --namespace-isolation (and --global-namespaces) as multinetd is configured (spec §7.4)\n" +
		"  - eth0: the cluster-wide default network, from multinetd's configuration on the node (not visible from the API; spec §6)\n" +
		"  - no k8s.v1.cni.cncf.io/networks annotation: only the default network is attached\n" +
		"Network status: <none>\n" +
		"Result:    OK: multinetd would attach 0 network(s) besides the default network\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
