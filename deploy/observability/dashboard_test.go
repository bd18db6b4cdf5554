package observability

import (
	"encoding/json"
	"os"
	"testing"
)

// dashboardJSON is the part of dashboard.json the test reads.
type dashboardJSON struct {
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Query string `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// TestDashboardQueriesNameExportedMetrics parses every PromQL expression of
// the shipped dashboard.json (panels and the node variable) with the
// Prometheus parser and checks that each metric it names, and each label
// it matches on, is served by the component its panel is about, as that
// component's real collectors register them.
func TestDashboardQueriesNameExportedMetrics(t *testing.T) {
	b, err := os.ReadFile(DashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboardJSON
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", DashboardFile, err)
	}
	byTitle := map[string]Panel{}
	for _, p := range Panels {
		byTitle[p.Title] = p
	}
	fams := componentFamilies(t)
	if len(d.Panels) != len(Panels) {
		t.Errorf("%s has %d panels, Panels %d: regenerate (go run ./gen)", DashboardFile, len(d.Panels), len(Panels))
	}
	for _, p := range d.Panels {
		def, ok := byTitle[p.Title]
		if !ok {
			t.Errorf("panel %q is not in Panels: regenerate (go run ./gen)", p.Title)
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			if len(checkExported(t, fams, "panel "+p.Title, q.Expr, def.Component)) == 0 {
				t.Errorf("panel %q: %q names no metric", p.Title, q.Expr)
			}
		}
	}
	for _, v := range d.Templating.List {
		if v.Name == "node" {
			// label_values(metric, label) is Grafana's, not PromQL: its metric is.
			checkExported(t, fams, "variable node", "multinet_cni_operations_total", Multinetd)
			if v.Query != "label_values(multinet_cni_operations_total, node)" {
				t.Errorf("variable node: query %q", v.Query)
			}
		}
	}
}

// TestGeneratedFilesUpToDate fails when a generated file differs from what
// Render gives: someone edited it by hand or changed the source without
// `go run ./gen`.
func TestGeneratedFilesUpToDate(t *testing.T) {
	files, err := Render()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(name)
		if err != nil {
			t.Errorf("%s: %v (run go run ./gen in deploy/observability)", name, err)
			continue
		}
		if string(got) != string(want) {
			t.Errorf("%s is not what deploy/observability generates: run go run ./gen in deploy/observability", name)
		}
	}
}
