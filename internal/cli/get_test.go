package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	nadclient "github.com/multinet/multinet/pkg/client/clientset/versioned/typed/k8s.cni.cncf.io/v1"
)

// fakeNADs serves NetworkAttachmentDefinition Get from a map; the other
// methods of the generated client's interface are not implemented (a nil
// embedded interface).
type fakeNADs struct {
	nads map[string]*nadv1.NetworkAttachmentDefinition
	// noDeadline counts the calls made without a context deadline.
	noDeadline int
}

func (f *fakeNADs) NetworkAttachmentDefinitions(ns string) nadclient.NetworkAttachmentDefinitionInterface {
	return fakeNADClient{f: f, ns: ns}
}

type fakeNADClient struct {
	nadclient.NetworkAttachmentDefinitionInterface
	f  *fakeNADs
	ns string
}

func (c fakeNADClient) Get(ctx context.Context, name string, _ metav1.GetOptions) (*nadv1.NetworkAttachmentDefinition, error) {
	if _, ok := ctx.Deadline(); !ok {
		c.f.noDeadline++
	}
	if n, ok := c.f.nads[c.ns+"/"+name]; ok {
		return n, nil
	}
	return nil, apierrors.NewNotFound(nadv1.Resource("network-attachment-definitions"), name)
}

// useFakes makes the command's clients fakes holding objs (pods) and nads,
// with the namespace of its -n flag ("ns1" when not given).
func useFakes(cmd *cobra.Command, clients *clientsFunc, nads *fakeNADs, objs ...runtime.Object) {
	core := fake.NewClientset(objs...).CoreV1()
	*clients = func() (*clusterClients, error) {
		ns, _ := cmd.Flags().GetString("namespace")
		if ns == "" {
			ns = "ns1"
		}
		return &clusterClients{Core: core, NADs: nads, Namespace: ns, Timeout: time.Minute}, nil
	}
}

// execute runs cmd with args and returns the exit status Run would give,
// stdout and stderr.
func execute(t *testing.T, cmd *cobra.Command, out, errOut *bytes.Buffer, args ...string) (int, string, string) {
	t.Helper()
	cmd.SetArgs(args)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err := cmd.Execute()
	code := ExitOK
	var ee *ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.Code
		if ee.Err != nil {
			errOut.WriteString("error: " + ee.Err.Error() + "\n")
		}
	case err != nil:
		code = ExitUsage
		errOut.WriteString("error: " + err.Error() + "\n")
	}
	return code, out.String(), errOut.String()
}

func testPod(ns, name string, labels, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: annotations}}
}

const (
	statusTwo = `[{"name":"default-net","interface":"eth0","ips":["10.244.0.5"],"mac":"0a:00:00:00:00:01","mtu":1500,"default":true,` +
		`"dns":{"nameservers":["10.96.0.10"],"search":["svc.local"]}},` +
		`{"name":"ns1/sriov","interface":"net1","ips":["10.1.0.5/24","fd00::5"],"mac":"0a:00:00:00:00:02","default-route":["10.1.0.1"],` +
		`"device-info":{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:03:00.1"}}},` +
		`{"name":"ns1/vhost","interface":"net2","device-info":{"type":"vhost-user","version":"1.1.0","vhost-user":{"mode":"server","path":"/var/run/vhu/net2.sock"}}}]`
	statusAnnotation = "k8s.v1.cni.cncf.io/network-status"
)

func getFixture() []runtime.Object {
	return []runtime.Object{
		testPod("ns1", "web", map[string]string{"app": "web"}, map[string]string{statusAnnotation: statusTwo}),
		testPod("ns1", "plain", map[string]string{"app": "db"}, nil),
		testPod("ns1", "broken", nil, map[string]string{statusAnnotation: `{"name":"x"}`}),
		testPod("ns2", "other", map[string]string{"app": "web"}, map[string]string{statusAnnotation: `[{"name":"default-net","interface":"eth0","ips":["10.244.0.9"],"default":true}]`}),
	}
}

func runGet(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd, o := getCommand(Streams{Out: &out, ErrOut: &errOut})
	useFakes(cmd, &o.clients, &fakeNADs{}, getFixture()...)
	return execute(t, cmd, &out, &errOut, args...)
}

func TestGetTable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{name: "namespace table", args: []string{"pods"},
			stdout: "" +
				"POD      NETWORK       INTERFACE   IPS                   MAC                 DEVICE                              DEFAULT\n" +
				"broken   <invalid>     <none>      <none>                <none>              <none>                              <none>\n" +
				"plain    <none>        <none>      <none>                <none>              <none>                              <none>\n" +
				"web      default-net   eth0        10.244.0.5            0a:00:00:00:00:01   <none>                              true\n" +
				"web      ns1/sriov     net1        10.1.0.5/24,fd00::5   0a:00:00:00:00:02   pci 0000:03:00.1                    false\n" +
				"web      ns1/vhost     net2        <none>                <none>              vhost-user /var/run/vhu/net2.sock   false\n",
			stderr: "warning: pod ns1/broken: k8s.v1.cni.cncf.io/network-status: want a JSON list of maps, got a map\n"},
		{name: "wide, one pod by name", args: []string{"pod", "web", "-o", "wide"},
			stdout: "" +
				"POD   NETWORK       INTERFACE   IPS                   MAC                 DEVICE                              DEFAULT   MTU      DEFAULT-ROUTE   DNS\n" +
				"web   default-net   eth0        10.244.0.5            0a:00:00:00:00:01   <none>                              true      1500     <none>          10.96.0.10,search=svc.local\n" +
				"web   ns1/sriov     net1        10.1.0.5/24,fd00::5   0a:00:00:00:00:02   pci 0000:03:00.1                    false     <none>   10.1.0.1        <none>\n" +
				"web   ns1/vhost     net2        <none>                <none>              vhost-user /var/run/vhu/net2.sock   false     <none>   <none>          <none>\n"},
		{name: "all namespaces, selector", args: []string{"po", "-A", "-l", "app=web", "--attached-only"},
			stdout: "" +
				"NAMESPACE   POD     NETWORK       INTERFACE   IPS                   MAC                 DEVICE                              DEFAULT\n" +
				"ns1         web     default-net   eth0        10.244.0.5            0a:00:00:00:00:01   <none>                              true\n" +
				"ns1         web     ns1/sriov     net1        10.1.0.5/24,fd00::5   0a:00:00:00:00:02   pci 0000:03:00.1                    false\n" +
				"ns1         web     ns1/vhost     net2        <none>                <none>              vhost-user /var/run/vhu/net2.sock   false\n" +
				"ns2         other   default-net   eth0        10.244.0.9            <none>              <none>                              true\n"},
		{name: "attached only drops pods without the annotation", args: []string{"pods", "-l", "app=db", "--attached-only"},
			stderr: "No pods found in ns1 namespace.\n"},
		{name: "-n", args: []string{"pods", "-n", "ns2"},
			stdout: "POD     NETWORK       INTERFACE   IPS          MAC      DEVICE   DEFAULT\n" +
				"other   default-net   eth0        10.244.0.9   <none>   <none>   true\n"},
		{name: "a missing pod: the others are shown, exit 1", args: []string{"pods", "nope", "plain"}, code: ExitFailed,
			stdout: "POD     NETWORK   INTERFACE   IPS      MAC      DEVICE   DEFAULT\n" +
				"plain   <none>    <none>      <none>   <none>   <none>   <none>\n",
			stderr: "error: pod ns1/nope not found\n"},
		{name: "only missing pods: no header", args: []string{"pods", "nope", "gone"}, code: ExitFailed,
			stderr: "error: pod ns1/nope not found\npod ns1/gone not found\n"},
		{name: "not pods", args: []string{"nads"}, code: ExitUsage, stderr: `error: get: resource type "nads": only pods are supported` + "\n"},
		{name: "bad output", args: []string{"pods", "-o", "name"}, code: ExitUsage, stderr: `error: get: --output "name": must be empty, wide, json or yaml` + "\n"},
		{name: "names and selector", args: []string{"pods", "a", "-l", "x=y"}, code: ExitUsage, stderr: "error: get: pod names cannot be given with --selector\n"},
		{name: "names across namespaces", args: []string{"pods", "a", "-A"}, code: ExitUsage, stderr: "error: get: pods cannot be retrieved by name across all namespaces; give -n NAMESPACE\n"},
		{name: "no resource type", args: []string{}, code: ExitUsage, stderr: "error: requires at least 1 arg(s), only received 0\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runGet(t, tc.args...)
			if code != tc.code || stdout != tc.stdout || stderr != tc.stderr {
				t.Errorf("exit %d (want %d)\nstdout:\n%s\nwant:\n%s\nstderr:\n%s\nwant:\n%s", code, tc.code, stdout, tc.stdout, stderr, tc.stderr)
			}
		})
	}
}

func TestGetStructured(t *testing.T) {
	code, stdout, _ := runGet(t, "pods", "-o", "json")
	var list []struct {
		Namespace string            `json:"namespace"`
		Name      string            `json:"name"`
		Networks  []json.RawMessage `json:"networks"`
		Error     string            `json:"error"`
	}
	if err := json.Unmarshal([]byte(stdout), &list); err != nil || code != 0 {
		t.Fatalf("exit %d, %v:\n%s", code, err, stdout)
	}
	if len(list) != 3 || list[0].Name != "broken" || list[0].Error == "" || list[0].Networks == nil ||
		list[1].Name != "plain" || len(list[1].Networks) != 0 || list[2].Name != "web" || len(list[2].Networks) != 3 {
		t.Fatalf("list = %+v", list)
	}
	var c bytes.Buffer
	if err := json.Compact(&c, list[2].Networks[1]); err != nil {
		t.Fatal(err)
	}
	if want := `{"name":"ns1/sriov","interface":"net1","ips":["10.1.0.5/24","fd00::5"],"mac":"0a:00:00:00:00:02","default":false,"default-route":["10.1.0.1"],"device-info":{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:03:00.1"}}}`; c.String() != want {
		t.Errorf("network-status entry:\n%s\nwant:\n%s", c.String(), want)
	}

	code, stdout, _ = runGet(t, "pods", "web", "-o", "yaml")
	var y []map[string]any
	if err := yaml.Unmarshal([]byte(stdout), &y); err != nil || code != 0 {
		t.Fatalf("exit %d, %v:\n%s", code, err, stdout)
	}
	if len(y) != 1 || y[0]["name"] != "web" || y[0]["namespace"] != "ns1" || len(y[0]["networks"].([]any)) != 3 ||
		!strings.Contains(stdout, `      pci-address: "0000:03:00.1"`+"\n") {
		t.Errorf("yaml:\n%s", stdout)
	}

	code, stdout, stderr := runGet(t, "pods", "-n", "empty", "-o", "json")
	if code != 0 || stdout != "[]\n" || stderr != "" {
		t.Errorf("no pods: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestCallTimeout(t *testing.T) {
	for in, want := range map[string]time.Duration{"": defaultCallTimeout, "0": defaultCallTimeout, "0s": defaultCallTimeout,
		"5": 5 * time.Second, "1m": time.Minute, "250ms": 250 * time.Millisecond} {
		if got, err := callTimeout(&in); err != nil || got != want {
			t.Errorf("callTimeout(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"x", "-5s", "1.5"} {
		if _, err := callTimeout(&in); err == nil {
			t.Errorf("callTimeout(%q): no error", in)
		}
	}
	if got, err := callTimeout(nil); err != nil || got != defaultCallTimeout {
		t.Errorf("callTimeout(nil) = %v, %v", got, err)
	}
}

func TestClusterFlags(t *testing.T) {
	cmd := newGetCommand(Streams{})
	for _, name := range []string{"kubeconfig", "context", "namespace", "request-timeout", "server", "token", "as", "all-namespaces", "selector", "output", "attached-only"} {
		if cmd.Flags().Lookup(name) == nil {
			t.Errorf("get has no --%s flag", name)
		}
	}
	if f := cmd.Flags().ShorthandLookup("n"); f == nil || f.Name != "namespace" {
		t.Errorf("-n is not --namespace: %v", f)
	}
	// A kubeconfig that does not exist fails with exit 1, naming it.
	var out, errOut bytes.Buffer
	cmd, _ = getCommand(Streams{Out: &out, ErrOut: &errOut})
	code, _, stderr := execute(t, cmd, &out, &errOut, "pods", "--kubeconfig", "/nonexistent/kubeconfig")
	if code != ExitFailed || !strings.Contains(stderr, "/nonexistent/kubeconfig") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}
