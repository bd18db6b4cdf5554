package observability

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/multinet/multinet/internal/devices/deviceplugin"
	"github.com/multinet/multinet/internal/devices/dra"
	"github.com/multinet/multinet/internal/ipam/ipamd"
	"github.com/multinet/multinet/internal/node/daemon"
	"github.com/multinet/multinet/internal/webhook/certs"
	"github.com/multinet/multinet/internal/webhook/server"
)

// family is a metric family a component registers: whether it is a
// histogram (served as _bucket, _sum, _count) and its variable labels.
type family struct {
	histogram bool
	labels    map[string]bool
}

// recorder is a prometheus.Registerer that records the families of the
// collectors registered with it (from their Descs) instead of serving them.
type recorder map[string]family

var descRE = regexp.MustCompile(`^Desc\{fqName: "([^"]+)", .*variableLabels: \{([^}]*)\}\}$`)

func (r recorder) Register(c prometheus.Collector) error {
	_, histogram := c.(*prometheus.HistogramVec)
	if _, ok := c.(prometheus.Histogram); ok {
		histogram = true
	}
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			return fmt.Errorf("cannot read the descriptor %s", d)
		}
		f := family{histogram: histogram, labels: map[string]bool{}}
		for _, l := range strings.Split(m[2], ",") {
			if l != "" {
				f.labels[l] = true
			}
		}
		r[m[1]] = f
	}
	return nil
}

func (r recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (recorder) Unregister(prometheus.Collector) bool { return false }

// externalMetrics are the names the dashboard and rules read from
// components outside multinet, which this test cannot construct: the
// kube-state-metrics families (https://github.com/kubernetes/kube-state-metrics/tree/main/docs/metrics)
// and Prometheus's own up.
var externalMetrics = map[string][]string{
	KubeStateMetrics: {"kube_pod_container_resource_requests", "kube_node_status_capacity", "kube_node_status_allocatable", "kube_daemonset_status_number_unavailable"},
	Prometheus:       {"up"},
}

// targetLabels are the labels a scrape adds to every series (the
// PodMonitors' node label, Prometheus's job and instance, the operator's
// pod, namespace, container, endpoint).
var targetLabels = map[string]bool{"node": true, "job": true, "instance": true, "pod": true, "namespace": true, "container": true, "endpoint": true}

// componentFamilies builds each multinet component's metric families from
// the collectors it really registers: multinetd's (daemon.MetricCollectors,
// multinet-ipam's included), the webhook's (server.RegisterMetrics and
// the certificate manager's Registerer), the device plugin's, the DRA
// driver's and multinet-ipam-cleanup's.
func componentFamilies(t *testing.T) map[string]recorder {
	t.Helper()
	mnd := recorder{}
	mnd.MustRegister(daemon.MetricCollectors()...)
	wh := recorder{}
	if _, err := server.RegisterMetrics(wh); err != nil {
		t.Fatalf("webhook metrics: %v", err)
	}
	if _, err := certs.NewManager(fake.NewClientset().CoreV1(), certs.ManagerOptions{
		Namespace: Namespace, SecretName: "multinet-webhook-cert", Registerer: wh,
		Spec: certs.Spec{DNSNames: []string{"multinet-webhook"}, CAValidity: time.Hour, CertValidity: time.Hour},
	}); err != nil {
		t.Fatalf("webhook certificate metrics: %v", err)
	}
	dp, drv, cleanup := recorder{}, recorder{}, recorder{}
	dp.MustRegister(deviceplugin.MetricCollectors()...)
	drv.MustRegister(dra.MetricCollectors()...)
	cleanup.MustRegister(ipamd.CleanupMetricCollectors()...)
	return map[string]recorder{Multinetd: mnd, Webhook: wh, DevicePlugin: dp, DRADriver: drv, IPAMCleanup: cleanup}
}

// selector is one vector selector of an expression: its metric name and
// the label names it matches on.
type selector struct {
	name   string
	labels []string
}

// grafanaVars are values for the dashboard's variables, so that its
// expressions parse as PromQL.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$node", ".*")

// selectors parses expr with the Prometheus parser and returns its vector
// selectors. A selector without a metric name fails the test.
func selectors(t *testing.T, expr string) []selector {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(grafanaVars.Replace(expr))
	if err != nil {
		t.Fatalf("PromQL %q: %v", expr, err)
	}
	var out []selector
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		s := selector{name: vs.Name}
		for _, m := range vs.LabelMatchers {
			if m.Name == "__name__" {
				s.name = m.Value
				continue
			}
			s.labels = append(s.labels, m.Name)
		}
		if s.name == "" {
			t.Errorf("PromQL %q: a selector without a metric name (%s)", expr, vs)
		}
		out = append(out, s)
		return nil
	})
	return out
}

// checkExported fails the test when a selector of expr names a metric, or
// matches on a label, that none of the components serves.
func checkExported(t *testing.T, fams map[string]recorder, what, expr string, components ...string) (names []string) {
	t.Helper()
	for _, s := range selectors(t, expr) {
		names = append(names, s.name)
		if known(fams, s, components) {
			continue
		}
		t.Errorf("%s: %q names %s{%s}, which %v do not export", what, expr, s.name, strings.Join(s.labels, ","), components)
	}
	return names
}

func known(fams map[string]recorder, s selector, components []string) bool {
	for _, c := range components {
		for _, ext := range externalMetrics[c] {
			if s.name == ext {
				return true
			}
		}
		r := fams[c]
		f, ok := r[s.name]
		extra := map[string]bool{}
		if !ok {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				base, cut := strings.CutSuffix(s.name, suffix)
				if b, hit := r[base]; cut && hit && b.histogram {
					f, ok = b, true
					if suffix == "_bucket" {
						extra["le"] = true
					}
				}
			}
		}
		if !ok {
			continue
		}
		labelsOK := true
		for _, l := range s.labels {
			if !f.labels[l] && !targetLabels[l] && !extra[l] {
				labelsOK = false
			}
		}
		if labelsOK {
			return true
		}
	}
	return false
}
