//go:build e2e

// Package e2e holds the end-to-end tests of multinet. They run against the
// real cluster of hack/cluster-up.sh (make test-e2e brings it up and down
// around them) and fail, never skip, when it is not reachable. The tests
// other than TestMultiNode* run on one node, the target (E2E_NODE,
// target_test.go).
//
// The cluster is found through the env file cluster-up writes
// (_output/cluster/env, or $MULTINET_CLUSTER_ENV); $KUBECONFIG and the other
// variables of the environment win over the file.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/multinet/multinet/internal/testing/clusterenv"
	"github.com/multinet/multinet/pkg/client/clientset/versioned"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
)

// cluster is what every test needs to reach the cluster.
type cluster struct {
	env    map[string]string // the env file, overridden by the process environment
	config *rest.Config
	kube   kubernetes.Interface
	multi  *versioned.Clientset
	// deployed: multinet runs as deployed by deploy/overlays/local, not as
	// host processes (components_test.go).
	deployed bool
}

var testCluster *cluster

func TestMain(m *testing.M) {
	c, err := connect()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: the local cluster is not reachable: %v\n"+
			"e2e: start it with `make cluster-up` (or run `make test-e2e`, which starts and stops it)\n", err)
		os.Exit(1)
	}
	testCluster = c
	fmt.Fprintf(os.Stderr, "e2e: target node %s (E2E_NODE; the single-node tests' pods run there)\n", target.Name)
	os.Exit(m.Run())
}

// connect reads the env file, builds the clients and checks that the API
// server is ready and the node registered.
func connect() (*cluster, error) {
	envPath := os.Getenv("MULTINET_CLUSTER_ENV")
	if envPath == "" {
		envPath = filepath.Join("..", "..", "_output", "cluster", "env")
	}
	env, err := clusterenv.Read(envPath)
	if err != nil && os.Getenv("KUBECONFIG") == "" {
		return nil, fmt.Errorf("read env file (set MULTINET_CLUSTER_ENV or KUBECONFIG): %w", err)
	}
	if env == nil {
		env = map[string]string{}
	}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if _, ok := env[k]; ok || k == "KUBECONFIG" {
			env[k] = v
		}
	}
	if env["KUBECONFIG"] == "" {
		return nil, fmt.Errorf("%s: KUBECONFIG not set", envPath)
	}
	config, err := clientcmd.BuildConfigFromFlags("", env["KUBECONFIG"])
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", env["KUBECONFIG"], err)
	}
	config.Timeout = 30 * time.Second
	config.QPS, config.Burst = 50, 100
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	multi, err := versioned.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("multinet client: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	body, err := kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("GET %s/readyz: %w", config.Host, err)
	}
	if strings.TrimSpace(string(body)) != "ok" {
		return nil, fmt.Errorf("GET %s/readyz: %q", config.Host, body)
	}
	c := &cluster{env: env, config: config, kube: kube, multi: multi}
	if c.deployed, err = detectDeployed(ctx, c); err != nil {
		return nil, err
	}
	nodes, err := readNodes(env)
	if err != nil {
		return nil, err
	}
	if target, err = chooseTarget(env, nodes); err != nil {
		return nil, err
	}
	return c, nil
}

// mustEnv returns the cluster variable name, failing the test when unset.
func (c *cluster) mustEnv(t *testing.T, name string) string {
	t.Helper()
	v := c.env[name]
	if v == "" {
		t.Fatalf("cluster env variable %s is not set (is _output/cluster/env from an older cluster-up?)", name)
	}
	return v
}

// newNamespace creates a namespace for one test and deletes it when the test
// ends. The harness acts as cluster admin: the tests' NADs use node bridges,
// devices, masters and dataDirs, so it labels the namespace trusted as an
// admin would (podnetworks.NADTrustLabel, the shipped NAD trust policy's
// rule "admin-labelled"; docs/nad-trust.md). newTenantNamespace makes one
// without that label.
func newNamespace(t *testing.T) string {
	t.Helper()
	return createNamespace(t, map[string]string{podnetworks.NADTrustLabel: podnetworks.NADTrustUnrestricted})
}

// createNamespace creates a namespace labelled multinet.io/e2e=true and
// extra for one test and deletes it when the test ends.
func createNamespace(t *testing.T, extra map[string]string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	labels := map[string]string{"multinet.io/e2e": "true"}
	for k, v := range extra {
		labels[k] = v
	}
	ns, err := testCluster.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "multinet-e2e-", Labels: labels},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := testCluster.kube.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// testContext returns a context that ends with the test or after d.
func testContext(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
