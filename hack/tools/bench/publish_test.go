package main

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// msDist is a sample of the given milliseconds.
func msDist(v ...float64) (d dist) {
	for _, x := range v {
		d = append(d, time.Duration(x*float64(time.Millisecond)))
	}
	return d
}

// rampDist is n samples: 1, 2, … n ms.
func rampDist(n int) (d dist) {
	for i := 1; i <= n; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	return d
}

// TestPercentileRule: a percentile is printed only when the sample supports
// it (p99 from 100 values, p90 from 10); below, the maximum is printed as
// "max", never as a percentile, with the sample size.
func TestPercentileRule(t *testing.T) {
	for _, tc := range []struct {
		p    float64
		n    int
		want bool
	}{{99, 99, false}, {99, 100, true}, {90, 9, false}, {90, 10, true}, {50, 1, false}, {50, 2, true}} {
		if got := supports(tc.p, tc.n); got != tc.want {
			t.Errorf("supports(p%v, n=%d) = %v, want %v", tc.p, tc.n, got, tc.want)
		}
	}
	for _, tc := range []struct {
		d    dist
		want string
	}{
		{rampDist(100), "p50 50.0 / p90 90.0 / p99 99.0 (n 100)"},
		{rampDist(50), "p50 25.0 / p90 45.0 / max 50.0 (n 50)"},
		{rampDist(5), "p50 3.0 / max 5.0 (n 5)"},
		{rampDist(1), "max 1.0 (n 1)"},
		{nil, "n/a"},
	} {
		if got := tc.d.triple(); got != tc.want {
			t.Errorf("triple of %d samples = %q, want %q", len(tc.d), got, tc.want)
		}
	}
	if got := rampDist(50).q(99); got != "max 50.0" {
		t.Errorf("q(99) of 50 samples = %q, want the maximum", got)
	}
}

// sampleResults is a run with every kind of measure, as the bench would
// have measured it.
func sampleResults() *results {
	started := time.Date(2026, 11, 29, 18, 50, 0, 0, time.UTC)
	r := &results{
		o:       &options{commit: "abc1234", command: "hack/bench.sh -n 100 -concurrency 10", runtimeConf: "/etc/cni/net.d/00-multinet.conflist"},
		started: started, cpus: 2, kernel: "6.18.44", k8s: "v1.37.2", node: "vm", runtime: "containerd://2.4.2",
		memTotal: 24 << 30, pid: 42,
		addMultinet: rampDist(100), addDirect: rampDist(100), delMultinet: msDist(10, 12, 14), delDirect: msDist(9, 10, 11),
		rssPods: 100, rssLoaded: memory{rss: 37 << 20, anon: 17 << 20, file: 20 << 20},
		hotPlug: hotPlugResult{toInterface: rampDist(50), toStatus: rampDist(50)},
	}
	c := concResult{n: 10, multinet: msDist(450, 460), direct: msDist(390, 400)}
	c.record("multinet", []time.Duration{100 * time.Millisecond, 300 * time.Millisecond, 450 * time.Millisecond}, []error{nil, nil, nil})
	c.record("direct", []time.Duration{90 * time.Millisecond, 390 * time.Millisecond}, []error{nil, nil})
	r.conc = append(r.conc, c, concResult{n: 50, multinet: msDist(3000), direct: msDist(2200)})
	return r
}

// svgText parses the SVG picture at path and returns the text of its
// elements; it fails the test when the file is not an SVG document.
func svgText(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var doc struct {
		XMLName xml.Name
		Inner   []byte `xml:",innerxml"`
	}
	if err := xml.NewDecoder(f).Decode(&doc); err != nil || doc.XMLName.Local != "svg" {
		t.Fatalf("%s is not an SVG document: %v (root %q)", path, err, doc.XMLName.Local)
	}
	return string(doc.Inner)
}

// TestWriteReport: from measured samples, the dated report holds the
// environment, the exact command, the headline table, every table of the
// printed report and links to its pictures, which are SVG documents with a
// line per measured path; a burst without a timeline gets no
// picture.
func TestWriteReport(t *testing.T) {
	dir := t.TempDir()
	r := sampleResults()
	rep, err := writeReport(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "2026-11-29-abc1234.md"); rep.path != want {
		t.Errorf("report at %s, want %s", rep.path, want)
	}
	b, err := os.ReadFile(rep.path)
	if err != nil {
		t.Fatal(err)
	}
	out := string(b)
	for _, want := range []string{
		"## Environment", "| kernel | 6.18.44 |", "| CPUs | 2 |", "| memory | 24.0 GiB |", "| Kubernetes | v1.37.2 |",
		"| container runtime | containerd://2.4.2 |", "| commit | abc1234 |",
		"## Command\n\n```sh\nhack/bench.sh -n 100 -concurrency 10\n```",
		"## Headline\n\n" + r.headline(),
		"| ADD latency (ms) | p50 50.0 / p90 90.0 / p99 99.0 (n 100) |",
		"| hot-plug, annotation PATCH → network-status (ms) | p50 25.0 / p90 45.0 / max 50.0 (n 50) |",
		"| 10 concurrent ADDs, wall (median of 2) | 0.45 s (1.15× direct) | 0.39 s |",
		"## Every table\n\n" + r.markdown(),
		"![2026-11-29-abc1234-add.svg](2026-11-29-abc1234-add.svg)",
		"![2026-11-29-abc1234-burst-10.svg](2026-11-29-abc1234-burst-10.svg)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "p99 50.0") {
		t.Errorf("report prints a p99 of 50 samples:\n%s", out)
	}
	if strings.Contains(out, "Multus thick |") && strings.Contains(rep.headline, "Multus") {
		t.Errorf("headline has a Multus column although Multus was not measured:\n%s", rep.headline)
	}
	wantPics := []string{"2026-11-29-abc1234-add.svg", "2026-11-29-abc1234-del.svg", "2026-11-29-abc1234-burst-10.svg"}
	if strings.Join(rep.pictures, ",") != strings.Join(wantPics, ",") {
		t.Errorf("pictures = %v, want %v (no burst-50: it has no timeline)", rep.pictures, wantPics)
	}
	for _, p := range wantPics {
		inner := svgText(t, filepath.Join(dir, p))
		if !strings.Contains(inner, "multinet (n=") || !strings.Contains(inner, "direct (n=") || strings.Contains(inner, "Multus") {
			t.Errorf("%s: want the series multinet and direct, and no Multus (not measured)", p)
		}
	}
	if inner := svgText(t, filepath.Join(dir, wantPics[2])); !strings.Contains(inner, "multinet (n=3)") || !strings.Contains(inner, "direct (n=2)") {
		t.Errorf("burst timeline does not count the recorded ADDs")
	}
}

// TestWriteReportMultus: with Multus measured, the headline has its column
// and the latency picture its series.
func TestWriteReportMultus(t *testing.T) {
	dir := t.TempDir()
	r := sampleResults()
	r.multusPID, r.o.multusBinDir = 7, "/multus"
	r.addMultus, r.delMultus = rampDist(100), msDist(20, 21)
	r.conc[0].multus = msDist(700)
	rep, err := writeReport(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rep.headline, "| measure | multinet | direct | Multus thick |") ||
		!strings.Contains(rep.headline, "| 0.70 s (1.79× direct) |") || !strings.Contains(rep.headline, "| 3.00 s (1.36× direct) | 2.20 s | n/a |") {
		t.Errorf("headline lacks the Multus column:\n%s", rep.headline)
	}
	if !strings.Contains(svgText(t, filepath.Join(dir, "2026-11-29-abc1234-add.svg")), "Multus thick (n=100)") {
		t.Errorf("ADD picture has no Multus series")
	}
}

// TestUpdatePage: the page's latest-run block gets the report's link,
// headline and pictures, relative to the page; the rest of the page is
// kept; a page without the markers is refused.
func TestUpdatePage(t *testing.T) {
	dir := t.TempDir()
	rep, err := writeReport(filepath.Join(dir, "bench"), sampleResults())
	if err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "bench.md")
	before, after := "# Bench\n\nintro\n\n"+latestBegin+"\n", "\n\n## Reports\n\nend\n"
	if err := os.WriteFile(page, []byte(before+"old figures\n"+latestEnd+after), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 { // rewriting is idempotent
		if err := updatePage(page, rep); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(page)
	out := string(b)
	for _, want := range []string{"[2026-11-29-abc1234.md](bench/2026-11-29-abc1234.md)", rep.headline,
		"![2026-11-29-abc1234-add.svg](bench/2026-11-29-abc1234-add.svg)", "`hack/bench.sh -n 100 -concurrency 10`"} {
		if !strings.Contains(out, want) {
			t.Errorf("page lacks %q:\n%s", want, out)
		}
	}
	if !strings.HasPrefix(out, before) || !strings.HasSuffix(out, latestEnd+after) || strings.Contains(out, "old figures") {
		t.Errorf("page outside the block changed, or the old block stayed:\n%s", out)
	}
	bare := filepath.Join(dir, "bare.md")
	_ = os.WriteFile(bare, []byte("# no markers\n"), 0o644)
	if err := updatePage(bare, rep); err == nil {
		t.Error("a page without the markers: no error")
	}
}

func TestMemTotal(t *testing.T) {
	if got := memTotal([]byte("MemFree: 1 kB\nMemTotal:       24576000 kB\n")); got != 24576000<<10 {
		t.Errorf("memTotal = %d", got)
	}
	if memTotal([]byte("nothing\n")) != 0 {
		t.Error("memTotal of no MemTotal line is not 0")
	}
}

// TestLatestRunIsAGeneratedReport: docs/bench.md's latest-run block is
// either the placeholder or a generated report's: the report exists next to
// it, holds the block's headline table verbatim, and every picture the
// block shows exists.
func TestLatestRunIsAGeneratedReport(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	b, err := os.ReadFile(filepath.Join(root, "docs", "bench.md"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	i, j := strings.Index(page, latestBegin), strings.Index(page, latestEnd)
	if i < 0 || j < i {
		t.Fatalf("docs/bench.md has no %s … %s block", latestBegin, latestEnd)
	}
	block := page[i+len(latestBegin) : j]
	m := regexp.MustCompile(`\]\((bench/[^)]+\.md)\)`).FindStringSubmatch(block)
	if m == nil {
		if !strings.Contains(block, "No report has been generated") {
			t.Fatalf("the latest-run block links no report and is not the placeholder:\n%s", block)
		}
		return
	}
	rep, err := os.ReadFile(filepath.Join(root, "docs", m[1]))
	if err != nil {
		t.Fatalf("the latest-run block links %s: %v", m[1], err)
	}
	table := regexp.MustCompile(`(?m)^\|.*\|$\n?`).FindAllString(block, -1)
	if len(table) < 3 || !strings.Contains(string(rep), strings.Join(table, "")) {
		t.Errorf("the latest-run block's table is not the headline of %s:\n%s", m[1], strings.Join(table, ""))
	}
	for _, p := range regexp.MustCompile(`!\[[^]]*\]\(([^)]+)\)`).FindAllStringSubmatch(block, -1) {
		if _, err := os.Stat(filepath.Join(root, "docs", p[1])); err != nil {
			t.Errorf("picture %s: %v", p[1], err)
		}
	}
}

// TestREADMEQuotesGeneratedReports: every README line that quotes a
// `make bench` figure links the dated report it comes from, and quotes it
// verbatim (in backticks) from that report.
func TestREADMEQuotesGeneratedReports(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	figure := regexp.MustCompile(`\d+(\.\d+)? ?(ms|s|MiB|×)\b|\bp9\d\b`)
	link := regexp.MustCompile(`\]\((docs/bench/\d{4}-\d{2}-\d{2}-[^)/]+\.md)\)`)
	quote := regexp.MustCompile("`([^`]+)`")
	for i, line := range strings.Split(string(b), "\n") {
		at := strings.Index(line, "make bench")
		if at < 0 {
			continue
		}
		if at > 0 && line[at-1] == '`' {
			at-- // "`make bench`": keep its quotes paired
		}
		tail := line[at:]
		// The figures outside backticks: none may be left.
		if bare := quote.ReplaceAllString(tail, ""); figure.MatchString(bare) {
			t.Errorf("README line %d quotes a bench figure outside a quote of a report: %s", i+1, tail)
		}
		quotes := quote.FindAllStringSubmatch(tail, -1)
		var figures []string
		for _, q := range quotes {
			if figure.MatchString(q[1]) {
				figures = append(figures, q[1])
			}
		}
		if len(figures) == 0 {
			continue
		}
		m := link.FindStringSubmatch(tail)
		if m == nil {
			t.Errorf("README line %d quotes bench figures %q but links no dated report", i+1, figures)
			continue
		}
		rep, err := os.ReadFile(filepath.Join(root, m[1]))
		if err != nil {
			t.Errorf("README line %d: %v", i+1, err)
			continue
		}
		for _, f := range figures {
			if !strings.Contains(string(rep), f) {
				t.Errorf("README line %d quotes %q, which %s does not hold", i+1, f, m[1])
			}
		}
	}
}
