package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/internal/cli/explain"
)

func runExplain(t *testing.T, nads *fakeNADs, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd, o := explainCommand(Streams{Out: &out, ErrOut: &errOut})
	useFakes(cmd, &o.clients, nads,
		testPod("ns1", "web", nil, map[string]string{
			nadv1.NetworksAnnotation: "net-a,other/net-x,gone",
			statusAnnotation:         `[{"name":"default-net","interface":"eth0","default":true},{"name":"ns1/net-a","interface":"net1","ips":["10.1.0.2"]}]`,
		}),
		testPod("ns1", "plain", nil, nil))
	return execute(t, cmd, &out, &errOut, args...)
}

func explainNADs() *fakeNADs {
	mk := func(ns, name, conf string) *nadv1.NetworkAttachmentDefinition {
		return &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: conf}}
	}
	return &fakeNADs{nads: map[string]*nadv1.NetworkAttachmentDefinition{
		"ns1/net-a":   mk("ns1", "net-a", `{"cniVersion":"1.0.0","type":"bridge"}`),
		"other/net-x": mk("other", "net-x", `{"cniVersion":"1.0.0","type":"macvlan"}`),
	}}
}

func TestExplainCommand(t *testing.T) {
	nads := explainNADs()
	code, stdout, stderr := runExplain(t, nads, "web")
	for _, want := range []string{
		"Pod:       ns1/web\n",
		"  [0] ns1/net-a -> net1: OK\n",
		"      status:        net1  ns1/net-a  ips 10.1.0.2\n",
		"  [1] other/net-x -> net2: OK\n",
		"  [2] ns1/gone -> net3: FAIL\n      error:         metadata.annotations[\"k8s.v1.cni.cncf.io/networks\"]: networks[2] \"gone\": NetworkAttachmentDefinition ns1/gone not found (spec §3.4.1)",
		"Result:    FAIL: 1 of 3 attachment(s) would fail",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if code != 0 || stderr != "" {
		t.Errorf("exit %d, stderr %q: an explained failure is not a command failure", code, stderr)
	}
	if nads.noDeadline != 0 {
		t.Errorf("%d NAD lookups without a context deadline", nads.noDeadline)
	}

	code, stdout, _ = runExplain(t, explainNADs(), "web", "-o", "json", "--global-namespaces", " default , ")
	var x explain.Explanation
	if err := json.Unmarshal([]byte(stdout), &x); err != nil || code != 0 {
		t.Fatalf("exit %d, %v:\n%s", code, err, stdout)
	}
	if x.OK || len(x.Attachments) != 3 || x.Attachments[1].Error == "" || !strings.Contains(x.Attachments[1].Error, "namespace isolation") ||
		!strings.Contains(string(x.Attachments[0].Config), `"bridge"`) || x.Attachments[0].Status == nil || len(x.NetworkStatus) != 2 {
		t.Errorf("--global-namespaces implies isolation; explanation = %+v", x)
	}

	code, stdout, _ = runExplain(t, explainNADs(), "plain", "-o", "yaml")
	var y map[string]any
	if err := yaml.Unmarshal([]byte(stdout), &y); err != nil || code != 0 {
		t.Fatalf("exit %d, %v:\n%s", code, err, stdout)
	}
	if y["name"] != "plain" || y["ok"] != true || len(y["attachments"].([]any)) != 0 {
		t.Errorf("yaml:\n%s", stdout)
	}

	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"nope"}, ExitFailed, "error: pod ns1/nope not found\n"},
		{[]string{"web", "-n", "ns2"}, ExitFailed, "error: pod ns2/web not found\n"},
		{[]string{"web", "-o", "wide"}, ExitUsage, `error: explain: --output "wide": must be empty, json or yaml` + "\n"},
		{[]string{}, ExitUsage, "error: accepts 1 arg(s), received 0\n"},
	} {
		code, stdout, stderr := runExplain(t, explainNADs(), tc.args...)
		if code != tc.code || stdout != "" || stderr != tc.stderr {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %d, %q", tc.args, code, stdout, stderr, tc.code, tc.stderr)
		}
	}
}
