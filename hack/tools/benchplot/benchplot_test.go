package benchplot

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotter"
)

// svgDoc parses b as XML and returns the root element's name, the text of
// every <text> element and the number of <path> elements.
func svgDoc(t *testing.T, b []byte) (root string, texts []string, paths int) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	inText := false
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not valid XML: %v\n%s", err, b)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = e.Name.Local
			}
			switch e.Name.Local {
			case "text":
				inText = true
				texts = append(texts, "")
			case "path":
				paths++
			}
		case xml.CharData:
			if inText {
				texts[len(texts)-1] += string(e)
			}
		case xml.EndElement:
			if e.Name.Local == "text" {
				inText = false
			}
		}
	}
	return root, texts, paths
}

func has(texts []string, want string) bool {
	for _, s := range texts {
		if strings.Contains(s, want) {
			return true
		}
	}
	return false
}

// TestCDFWritesSVGWithSeries: the latency picture is a valid SVG document
// whose legend names each measured path with its sample size, with the
// title and axis labels; a path without samples is left out.
func TestCDFWritesSVGWithSeries(t *testing.T) {
	p, err := CDF("ADD latency", "ms", []Series{
		{Name: "multinet", Values: []float64{50, 52, 61, 70}},
		{Name: "direct", Values: []float64{40, 41, 45}},
		{Name: "Multus thick", Values: nil},
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "add.svg")
	if err := WriteSVG(p, path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	root, texts, paths := svgDoc(t, b)
	if root != "svg" {
		t.Fatalf("root element %q, want svg", root)
	}
	for _, want := range []string{"ADD latency", "ms", "fraction of operations", "multinet (n=4)", "direct (n=3)"} {
		if !has(texts, want) {
			t.Errorf("SVG has no text %q; texts: %q", want, texts)
		}
	}
	if has(texts, "Multus") {
		t.Errorf("a series without samples is in the legend: %q", texts)
	}
	if paths < 2 {
		t.Errorf("SVG has %d paths, want at least the 2 series' lines", paths)
	}
	// Text names Liberation Sans's metric-compatible fallbacks, and no
	// font without one.
	if !bytes.Contains(b, []byte(svgFallbacks)) || bytes.Contains(b, []byte("font-family:Liberation Serif")) || bytes.Contains(b, []byte(svgFamily)) {
		t.Errorf("SVG text does not name the fallback fonts %q", svgFallbacks)
	}
}

// TestTimelineWritesSVG: the burst picture is a valid SVG with one legend
// entry per path and its y label.
func TestTimelineWritesSVG(t *testing.T) {
	p, err := Timeline("10 concurrent ADDs", "sandboxes attached", []Series{
		{Name: "multinet", Values: []float64{0.2, 0.1, 0.4}},
		{Name: "direct", Values: []float64{0.1, 0.3}},
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := SVG(p)
	if err != nil {
		t.Fatal(err)
	}
	root, texts, _ := svgDoc(t, b)
	if root != "svg" {
		t.Fatalf("root element %q, want svg", root)
	}
	for _, want := range []string{"10 concurrent ADDs", "sandboxes attached", "seconds since the start", "multinet (n=3)", "direct (n=2)"} {
		if !has(texts, want) {
			t.Errorf("SVG has no text %q; texts: %q", want, texts)
		}
	}
	// Counts are labelled as plain numbers.
	for _, tk := range p.Y.Tick.Marker.Ticks(0, 50) {
		if strings.Contains(tk.Label, ".") {
			t.Errorf("count tick label %q, want a plain number", tk.Label)
		}
	}
}

// TestNoSeriesIsAnError: a picture with nothing measured is refused, not
// drawn empty.
func TestNoSeriesIsAnError(t *testing.T) {
	if _, err := CDF("DEL latency", "ms", []Series{{Name: "multinet"}}); err == nil {
		t.Error("CDF of no values: no error")
	}
	if err := WriteSVG(nil, filepath.Join(t.TempDir(), "x.svg")); err == nil {
		t.Error("WriteSVG(nil): no error")
	}
}

// TestPoints: the CDF climbs to 1 in sorted order from (min, 0); the
// timeline counts completions from (0, 0).
func TestPoints(t *testing.T) {
	got := cdfPoints([]float64{3, 1, 2, 2})
	want := plotter.XYs{{X: 1, Y: 0}, {X: 1, Y: 0.25}, {X: 2, Y: 0.5}, {X: 2, Y: 0.75}, {X: 3, Y: 1}}
	if len(got) != len(want) {
		t.Fatalf("cdfPoints = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("cdfPoints[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	tl := timelinePoints([]float64{0.5, 0.2})
	wantTL := plotter.XYs{{X: 0, Y: 0}, {X: 0.2, Y: 1}, {X: 0.5, Y: 2}}
	for i := range wantTL {
		if tl[i] != wantTL[i] {
			t.Errorf("timelinePoints[%d] = %v, want %v", i, tl[i], wantTL[i])
		}
	}
}
