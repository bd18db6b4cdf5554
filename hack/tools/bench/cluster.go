package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	flowv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	nadclient "github.com/multinet/multinet/pkg/client/clientset/versioned/typed/k8s.cni.cncf.io/v1"
)

// benchLabel marks every API object the bench creates.
const benchLabel = "multinet.io/bench"

// neverLabel is a node label no node has: the bench's pods select it, so
// that the kubelet rejects them at admission (phase Failed, no sandbox)
// while they stay bound to the node, where multinetd's informer sees them.
const neverLabel = "multinet.io/bench-never-schedule"

type cluster struct {
	rest  *rest.Config
	kube  kubernetes.Interface
	nads  nadclient.NetworkAttachmentDefinitionsGetter
	node  string
	ns    string
	image string
}

func newCluster(kubeconfig, node, ns, image string) (*cluster, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	rc.QPS, rc.Burst = 200, 400
	rc.UserAgent = "multinet-bench"
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	nc, err := nadclient.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return &cluster{rest: rc, kube: kc, nads: nc, node: node, ns: ns, image: image}, nil
}

func labels() map[string]string { return map[string]string{benchLabel: "true"} }

// namespaceLabels are the bench namespace's: labels() and the NAD trust
// label an admin sets, since the bench NADs name node bridges and dataDirs
// (docs/nad-trust.md).
func namespaceLabels() map[string]string {
	l := labels()
	l["multinet.io/nad-trust"] = "unrestricted"
	return l
}

// removeStale deletes namespaces and FlowSchemas of an earlier, interrupted run.
func (c *cluster) removeStale(ctx context.Context) error {
	sel := metav1.ListOptions{LabelSelector: benchLabel + "=true"}
	nss, err := c.kube.CoreV1().Namespaces().List(ctx, sel)
	if err != nil {
		return err
	}
	for _, n := range nss.Items {
		logf("removing namespace %s of an earlier run", n.Name)
		if err := c.kube.CoreV1().Namespaces().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	if errs := deleteMultusRBAC(ctx, c); len(errs) > 0 {
		return errors.Join(errs...)
	}
	return c.deleteFlowSchemas(ctx)
}

// setup creates the namespace and the two bridge NADs.
func (c *cluster) setup(ctx context.Context, nets []benchNet) error {
	if _, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: c.ns, Labels: namespaceLabels()},
	}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %w", c.ns, err)
	}
	for _, n := range nets {
		if _, err := c.nads.NetworkAttachmentDefinitions(c.ns).Create(ctx, &nadv1.NetworkAttachmentDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: n.name, Namespace: c.ns, Labels: labels()},
			Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: n.config},
		}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create NAD %s/%s: %w", c.ns, n.name, err)
		}
	}
	return nil
}

// createPods creates n pods (pod-000, pod-001, ...) bound to the node that
// select the bench networks, and waits until the kubelet has rejected them
// (phase Failed).
func (c *cluster) createPods(ctx context.Context, n int, networks string) ([]podRef, error) {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("pod-%03d", i)
	}
	return c.createPodsNamed(ctx, names, func(int) map[string]string { return nil }, networks)
}

// createPodsNamed creates pods of these names bound to the node, with
// labels() and extra(i), selecting networks, and waits until the kubelet has
// rejected them (phase Failed).
func (c *cluster) createPodsNamed(ctx context.Context, names []string, extra func(i int) map[string]string, networks string) ([]podRef, error) {
	var grace int64
	pods := make([]podRef, len(names))
	for i, name := range names {
		l := labels()
		for k, v := range extra(i) {
			l[k] = v
		}
		p, err := c.kube.CoreV1().Pods(c.ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Labels:      l,
				Annotations: map[string]string{"k8s.v1.cni.cncf.io/networks": networks},
			},
			Spec: corev1.PodSpec{
				NodeName:                      c.node,
				NodeSelector:                  map[string]string{neverLabel: "true"},
				TerminationGracePeriodSeconds: &grace,
				RestartPolicy:                 corev1.RestartPolicyNever,
				Containers:                    []corev1.Container{{Name: "c", Image: c.image}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("create pod %s: %w", name, err)
		}
		pods[i] = podRef{namespace: p.Namespace, name: p.Name, uid: string(p.UID)}
	}
	c.waitRejected(ctx, names)
	return pods, nil
}

// waitRejected waits until the kubelet has rejected each pod of names at
// admission (NodeAffinity) and written its status once (phase Failed), so
// that its requests are over before anything is measured.
func (c *cluster) waitRejected(ctx context.Context, names []string) {
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := c.kube.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		failed := 0
		for _, p := range list.Items {
			if want[p.Name] && p.Status.Phase == corev1.PodFailed {
				failed++
			}
		}
		return failed == len(names), nil
	})
	if err != nil {
		logf("warning: not every bench pod was rejected by the kubelet within 60s (%v); continuing", err)
	}
}

// deleteNamespace deletes the bench namespace (pods, NADs, events) and
// waits for it to be gone.
func (c *cluster) deleteNamespace(ctx context.Context) error {
	err := c.kube.CoreV1().Namespaces().Delete(ctx, c.ns, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := c.kube.CoreV1().Namespaces().Get(ctx, c.ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// apiKey is a request kind: verb as apiserver_request_total spells it
// (GET, POST, PUT, PATCH, LIST, WATCH, DELETE) and resource[/subresource].
type apiKey struct{ verb, resource string }

func (k apiKey) String() string { return k.verb + " " + k.resource }

// flowSchemaSpec is one FlowSchema the bench adds to count the daemon's
// requests of one kind.
type flowSchemaSpec struct {
	key       apiKey
	verbs     []string // APF verbs
	groups    []string
	resources []string
}

// countedKinds are the request kinds counted per identity. The last
// FlowSchema catches every other request of the identity.
var countedKinds = []flowSchemaSpec{
	{apiKey{"GET", "pods"}, []string{"get"}, []string{""}, []string{"pods"}},
	{apiKey{"LIST/WATCH", "pods"}, []string{"list", "watch"}, []string{""}, []string{"pods"}},
	{apiKey{"PATCH", "pods"}, []string{"patch"}, []string{""}, []string{"pods"}},
	{apiKey{"PUT", "pods"}, []string{"update"}, []string{""}, []string{"pods"}},
	{apiKey{"PATCH", "pods/status"}, []string{"patch"}, []string{""}, []string{"pods/status"}},
	{apiKey{"PUT", "pods/status"}, []string{"update"}, []string{""}, []string{"pods/status"}},
	{apiKey{"GET", "network-attachment-definitions"}, []string{"get"}, []string{"k8s.cni.cncf.io"}, []string{"network-attachment-definitions"}},
	{apiKey{"POST", "events"}, []string{"create"}, []string{"", "events.k8s.io"}, []string{"events"}},
	{apiKey{"PATCH/PUT", "events"}, []string{"patch", "update"}, []string{"", "events.k8s.io"}, []string{"events"}},
	{apiKey{"any other", "(anything)"}, []string{"*"}, []string{"*"}, []string{"*"}},
}

const flowSchemaPrefix = "multinet-bench-"

// identity is an API user whose requests the bench counts by kind.
type identity struct {
	// label names the identity in FlowSchema names and the report.
	label string
	user  string
	// priority is the APF priority level the user's requests get without
	// the bench's FlowSchemas; the bench's FlowSchemas keep it.
	priority string
	// catchAll adds a last FlowSchema for every other request of the user
	// (not for the kubelet: it would move its node and lease requests off
	// their node-high priority level).
	catchAll bool
}

// kinds returns the counted request kinds of id.
func (id identity) kinds() []flowSchemaSpec {
	if id.catchAll {
		return countedKinds
	}
	return countedKinds[:len(countedKinds)-1]
}

func flowSchemaName(id identity, i int) string {
	return fmt.Sprintf("%s%s-%02d", flowSchemaPrefix, id.label, i)
}

// createFlowSchemas adds, per identity, one FlowSchema per counted kind that
// matches only that user and sends its requests to the priority level they
// get anyway, so that the API server's
// apiserver_flowcontrol_dispatched_requests_total{flow_schema} counts the
// user's requests by kind without changing how they are served. It waits
// until the API server uses them.
func (c *cluster) createFlowSchemas(ctx context.Context, ids []identity) error {
	var names []string
	for n, id := range ids {
		for i, k := range id.kinds() {
			rule := flowv1.PolicyRulesWithSubjects{
				Subjects: []flowv1.Subject{{Kind: flowv1.SubjectKindUser, User: &flowv1.UserSubject{Name: id.user}}},
				ResourceRules: []flowv1.ResourcePolicyRule{{
					Verbs: k.verbs, APIGroups: k.groups, Resources: k.resources,
					ClusterScope: true, Namespaces: []string{flowv1.NamespaceEvery},
				}},
			}
			if k.verbs[0] == "*" {
				rule.NonResourceRules = []flowv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}}
			}
			fs := &flowv1.FlowSchema{
				ObjectMeta: metav1.ObjectMeta{Name: flowSchemaName(id, i), Labels: labels()},
				Spec: flowv1.FlowSchemaSpec{
					PriorityLevelConfiguration: flowv1.PriorityLevelConfigurationReference{Name: id.priority},
					MatchingPrecedence:         int32(50 + 20*n + i),
					DistinguisherMethod:        &flowv1.FlowDistinguisherMethod{Type: flowv1.FlowDistinguisherMethodByUserType},
					Rules:                      []flowv1.PolicyRulesWithSubjects{rule},
				},
			}
			if _, err := c.kube.FlowcontrolV1().FlowSchemas().Create(ctx, fs, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create FlowSchema %s: %w", fs.Name, err)
			}
			names = append(names, fs.Name)
		}
	}
	// The API server's APF config controller marks each FlowSchema
	// (condition Dangling) once it has loaded it.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, name := range names {
			fs, err := c.kube.FlowcontrolV1().FlowSchemas().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			seen := false
			for _, cond := range fs.Status.Conditions {
				seen = seen || cond.Type == flowv1.FlowSchemaConditionDangling
			}
			if !seen {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("FlowSchemas not loaded by the API server: %w", err)
	}
	time.Sleep(time.Second)
	return nil
}

func (c *cluster) deleteFlowSchemas(ctx context.Context) error {
	return c.kube.FlowcontrolV1().FlowSchemas().DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: benchLabel + "=true"})
}

// apiCounts is a snapshot of the API server's request counters.
type apiCounts struct {
	at time.Time
	// identity: per identity label, its requests by kind (APF dispatched,
	// per FlowSchema).
	identity map[string]map[apiKey]float64
	// all: every client's requests on pods and events (apiserver_request_total).
	all map[apiKey]float64
	// patchStatusSum and patchStatusCount: apiserver_request_duration_seconds
	// of PATCH pods/status (every client).
	patchStatusSum, patchStatusCount float64
}

func (c *cluster) apiSnapshot(ctx context.Context, ids []identity) (*apiCounts, error) {
	raw, err := c.kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("API server /metrics: %w", err)
	}
	samples := parseProm(raw)
	s := &apiCounts{at: time.Now(), identity: map[string]map[apiKey]float64{}, all: map[apiKey]float64{}}
	for _, id := range ids {
		m := map[apiKey]float64{}
		for i, k := range id.kinds() {
			name := flowSchemaName(id, i)
			m[k.key] = sumWhere(samples, "apiserver_flowcontrol_dispatched_requests_total", func(l map[string]string) bool {
				return l["flow_schema"] == name
			})
		}
		s.identity[id.label] = m
	}
	isPatchStatus := func(l map[string]string) bool {
		return l["verb"] == "PATCH" && l["resource"] == "pods" && l["subresource"] == "status" && l["group"] == ""
	}
	s.patchStatusSum = sumWhere(samples, "apiserver_request_duration_seconds_sum", isPatchStatus)
	s.patchStatusCount = sumWhere(samples, "apiserver_request_duration_seconds_count", isPatchStatus)
	for _, smp := range samples {
		if smp.name != "apiserver_request_total" {
			continue
		}
		l := smp.labels
		if l["resource"] != "pods" && l["resource"] != "events" {
			continue
		}
		if l["group"] != "" && l["group"] != "events.k8s.io" {
			continue
		}
		res := l["resource"]
		if l["subresource"] != "" {
			res += "/" + l["subresource"]
		}
		s.all[apiKey{l["verb"], res}] += smp.value
	}
	return s, nil
}

// subID returns b − a per identity and key.
func subID(a, b map[string]map[apiKey]float64) map[string]map[apiKey]float64 {
	out := map[string]map[apiKey]float64{}
	for id := range b {
		out[id] = sub(a[id], b[id])
	}
	return out
}

// sub returns b − a per key.
func sub(a, b map[apiKey]float64) map[apiKey]float64 {
	out := map[apiKey]float64{}
	for k, v := range b {
		out[k] = v - a[k]
	}
	for k, v := range a {
		if _, ok := b[k]; !ok {
			out[k] = -v
		}
	}
	return out
}

// daemonMetrics reads multinetd's own /metrics.
func daemonMetrics(ctx context.Context, addr string) ([]sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return parseProm(b), nil
}

// daemonPID reads multinetd's PID file and checks the process is multinetd.
func daemonPID(pidFile string) (int, error) {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", pidFile, err)
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return 0, fmt.Errorf("multinetd pid %d: %w", pid, err)
	}
	if strings.TrimSpace(string(comm)) != "multinetd" {
		return 0, fmt.Errorf("pid %d from %s is %q, not multinetd", pid, pidFile, strings.TrimSpace(string(comm)))
	}
	return pid, nil
}

// memory is a process's resident memory (bytes): total, anonymous, file-backed.
type memory struct{ rss, anon, file int64 }

func readMemory(pid int) (memory, error) {
	var m memory
	var err error
	if m.rss, err = procStatusKB(pid, "VmRSS"); err != nil {
		return m, err
	}
	if m.anon, err = procStatusKB(pid, "RssAnon"); err != nil {
		return m, err
	}
	m.file, err = procStatusKB(pid, "RssFile")
	return m, err
}

// procStatusKB returns a "Vm...:  N kB" field of /proc/<pid>/status in bytes.
func procStatusKB(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				break
			}
			n, err := strconv.ParseInt(f[0], 10, 64)
			return n * 1024, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, field)
}

// cgroupMemory returns the memory peak and limit (bytes) of pid's memory
// cgroup: cgroup v1 memory.max_usage_in_bytes and memory.limit_in_bytes,
// else v2 memory.peak and memory.max (limit 0: none). For a deployed
// multinetd, its container's cgroup: the peak since the container started.
func cgroupMemory(pid int) (peak, limit int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "memory" {
			dir := "/sys/fs/cgroup/memory" + parts[2]
			if peak, err = readCgroupInt(dir + "/memory.max_usage_in_bytes"); err != nil {
				return 0, 0, err
			}
			limit, err = readCgroupInt(dir + "/memory.limit_in_bytes")
			if limit >= 1<<62 {
				limit = 0
			}
			return peak, limit, err
		}
	}
	for _, root := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		for _, line := range strings.Split(string(b), "\n") {
			if p, ok := strings.CutPrefix(line, "0::"); ok {
				if peak, err = readCgroupInt(root + p + "/memory.peak"); err == nil {
					limit, err = readCgroupInt(root + p + "/memory.max")
					return peak, limit, err
				}
			}
		}
	}
	return 0, 0, fmt.Errorf("pid %d: no memory cgroup with a peak", pid)
}
