//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"
)

// observabilityDir holds the generated dashboard and rules
// (deploy/observability, docs/operations.md).
const observabilityDir = "../../deploy/observability/"

// multinetMetricRE finds the multinet metric names in a PromQL expression
// (the unit tests in deploy/observability parse them with the Prometheus
// parser; here the names are all that matter).
var multinetMetricRE = regexp.MustCompile(`\bmultinet_[a-z0-9_]+\b`)

// quotedRE matches PromQL's double-quoted strings (label values such as
// resource=~"multinet_io_.+"), which are not metric names.
var quotedRE = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// Components whose /metrics the dashboard and the rules read (their
// PodMonitors' job names, deploy/observability).
const (
	obsMultinetd    = "multinetd"
	obsWebhook      = "multinet-webhook"
	obsDevicePlugin = "multinet-deviceplugin"
	obsDRADriver    = "multinet-dra-driver"
	obsIPAMCleanup  = "multinet-ipam-cleanup"
)

// componentOf is the component an expression's metric is about: the one
// its job matcher names (multinet-ipam-cleanup serves multinet_ipam_*
// names multinetd serves too), else the one its name's prefix says.
func componentOf(expr, name string) string {
	if strings.Contains(expr, `job="`+obsIPAMCleanup+`"`) {
		return obsIPAMCleanup
	}
	for prefix, c := range map[string]string{"multinet_webhook_": obsWebhook, "multinet_deviceplugin_": obsDevicePlugin, "multinet_dra_": obsDRADriver} {
		if strings.HasPrefix(name, prefix) {
			return c
		}
	}
	return obsMultinetd
}

// observedExprs returns the PromQL expressions of the shipped dashboard's
// panels and alert rules.
func observedExprs(t *testing.T) []string {
	t.Helper()
	var exprs []string
	b, err := os.ReadFile(observabilityDir + "dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			exprs = append(exprs, q.Expr)
		}
	}
	if b, err = os.ReadFile(observabilityDir + "rules.yaml"); err != nil {
		t.Fatal(err)
	}
	var r struct {
		Groups []struct {
			Rules []struct {
				Expr string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &r); err != nil {
		t.Fatalf("rules.yaml: %v", err)
	}
	for _, g := range r.Groups {
		for _, rule := range g.Rules {
			exprs = append(exprs, rule.Expr)
		}
	}
	return exprs
}

// observedMetrics returns, per component, the multinet_* metric names the
// shipped Grafana dashboard and alert rules read from it, sorted.
func observedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	n := 0
	for _, e := range observedExprs(t) {
		for _, part := range strings.Split(e, "\nor ") {
			for _, name := range multinetMetricRE.FindAllString(quotedRE.ReplaceAllString(part, `""`), -1) {
				c := componentOf(part, name)
				if !slices.Contains(out[c], name) {
					out[c] = append(out[c], name)
					n++
				}
			}
		}
	}
	for _, names := range out {
		slices.Sort(names)
	}
	if n == 0 {
		t.Fatal("the dashboard and rules name no multinet_* metric")
	}
	return out
}

// sampleNames are the metric names of the samples of a text exposition
// (histograms as _bucket, _sum and _count).
func sampleNames(text string) map[string]bool {
	out := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		name, _, _ := strings.Cut(l, "{")
		name, _, _ = strings.Cut(name, " ")
		out[name] = true
	}
	return out
}

// webhookMetrics reads the webhook's /metrics on its plain HTTP probes port
// (what its PodMonitor scrapes).
func webhookMetrics(t *testing.T) string {
	t.Helper()
	return httpMetrics(t, obsWebhook, webhookOf(t).probes+"/metrics")
}

// cleanupMetrics reads multinet-ipam-cleanup's /metrics at its pod's
// address, port 9393 (its container port metrics, what its PodMonitor
// scrapes; the host reaches every node's pod network). It is a
// Deployment's one pod, on whichever node the scheduler chose.
func cleanupMetrics(t *testing.T) string {
	t.Helper()
	pods := runningPods(t, obsIPAMCleanup)
	if len(pods) != 1 {
		t.Fatalf("%d running %s pods in %s, want 1:\n%s", len(pods), obsIPAMCleanup, systemNamespace, describePods(derefPods(pods)))
	}
	return httpMetrics(t, obsIPAMCleanup, "http://"+net.JoinHostPort(pods[0].Status.PodIP, "9393")+"/metrics")
}

// httpMetrics GETs url until it answers 200 (20 s at most) and returns the
// body; component names it in the failure.
func httpMetrics(t *testing.T, component, url string) string {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	var body string
	var last error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			last = err
			return false, nil
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			last = fmt.Errorf("%s: %v %.200s", resp.Status, err, b)
			return false, nil
		}
		body = string(b)
		return true, nil
	})
	if err != nil {
		t.Fatalf("%s metrics %s: %v (last: %v)", component, url, err, last)
	}
	return body
}

// sampleSum is the sum of the values of name's samples in a text
// exposition (NaN when it has none).
func sampleSum(text, name string) float64 {
	sum, found := 0.0, false
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, name+"{") && !strings.HasPrefix(l, name+" ") {
			continue
		}
		fields := strings.Fields(l)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			sum, found = sum+v, true
		}
	}
	if !found {
		return math.NaN()
	}
	return sum
}

// TestObservabilityMetricsScraped: every multinet_* metric that the
// shipped Grafana dashboard and alert rules read is served by the deployed
// component it is about, scraped where its PodMonitor scrapes it:
// multinetd, multinet-deviceplugin and multinet-dra-driver on the target
// node's loopback (host network), the webhook and multinet-ipam-cleanup at
// their pods' addresses. Before, a pod with a multinet-ipam network was
// attached and deleted on the target node (multinetd: CNI ADD and DEL, the
// slot wait, multinet-ipam; the webhook: its admission decisions). The
// device plugin advertises the local pools' devices and the DRA driver
// has published its ResourceSlice. A renamed or removed metric, or a
// dashboard query naming one that does not exist, fails it.
func TestObservabilityMetricsScraped(t *testing.T) {
	requireDeployed(t)
	observed := observedMetrics(t)
	ns := newNamespace(t)
	ipamBridgeNAD(t, ns, "obs", "obs")
	p := runPod(t, podSpec(ns, "obs", "obs"))
	deletePod(t, ns, p.Name)
	waitDRASlice(t, 90*time.Second)

	served := map[string]string{
		obsMultinetd:    target.daemonMetrics(t),
		obsWebhook:      webhookMetrics(t),
		obsDevicePlugin: target.loopbackMetrics(t, obsDevicePlugin, 9391),
		obsDRADriver:    target.loopbackMetrics(t, obsDRADriver, 9392),
		obsIPAMCleanup:  cleanupMetrics(t),
	}
	checked := 0
	for c, names := range observed {
		text, ok := served[c]
		if !ok {
			t.Errorf("the dashboard or the rules read %v from %s, which this test does not scrape", names, c)
			continue
		}
		have := sampleNames(text)
		for _, n := range names {
			checked++
			if !have[n] {
				t.Errorf("%s is read by the dashboard or the rules (deploy/observability) but %s does not serve it", n, c)
			}
		}
		t.Logf("%s: %s", c, strings.Join(names, " "))
	}
	for _, c := range []string{obsDevicePlugin, obsDRADriver, obsIPAMCleanup} {
		if len(observed[c]) == 0 {
			t.Errorf("the dashboard and the rules read nothing of %s", c)
		}
	}
	if v := sampleSum(served[obsDevicePlugin], "multinet_deviceplugin_devices"); !(v > 0) {
		t.Errorf("multinet-deviceplugin counts %v devices; the local cluster's pools have some", v)
	}
	if v := sampleSum(served[obsDRADriver], "multinet_dra_resourceslice_publishes_total"); !(v >= 1) {
		t.Errorf("multinet-dra-driver counts %v ResourceSlice publications; its slice is published", v)
	}
	t.Logf("checked %d metrics in %d components", checked, len(served))
}
