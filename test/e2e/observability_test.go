//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
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

// observedMetrics returns the multinet_* metric names the shipped dashboard
// and alert rules read, sorted.
func observedMetrics(t *testing.T) []string {
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
	var names []string
	for _, e := range exprs {
		for _, n := range multinetMetricRE.FindAllString(quotedRE.ReplaceAllString(e, `""`), -1) {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		t.Fatal("the dashboard and rules name no multinet_* metric")
	}
	return names
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
	url := webhookOf(t).probes + "/metrics"
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
		t.Fatalf("webhook metrics %s: %v (last: %v)", url, err, last)
	}
	return body
}

// TestObservabilityMetricsScraped: every
// multinet_* metric that the shipped Grafana dashboard and alert rules read
// is served by the deployed component it belongs to, after a pod with a
// multinet-ipam network was attached and deleted on the target node
// (multinetd: CNI ADD and DEL, the slot wait, multinet-ipam; the webhook:
// its admission decisions). A renamed or removed metric, or a dashboard
// query naming one that does not exist, fails it.
func TestObservabilityMetricsScraped(t *testing.T) {
	names := observedMetrics(t)
	ns := newNamespace(t)
	ipamBridgeNAD(t, ns, "obs", "obs")
	p := runPod(t, podSpec(ns, "obs", "obs"))
	deletePod(t, ns, p.Name)

	daemon := sampleNames(target.daemonMetrics(t))
	webhook := sampleNames(webhookMetrics(t))
	for _, n := range names {
		served, from := daemon, "multinetd on "+target.Name
		if strings.HasPrefix(n, "multinet_webhook_") {
			served, from = webhook, "multinet-webhook"
		}
		if !served[n] {
			t.Errorf("%s is read by the dashboard or the rules (deploy/observability) but %s does not serve it", n, from)
		}
	}
	t.Logf("checked %d metrics: %s", len(names), strings.Join(names, " "))
}
