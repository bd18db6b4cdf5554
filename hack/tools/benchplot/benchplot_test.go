package benchplot

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"gonum.org/v1/plot/plotter"
)

// decode parses b as a PNG image of the pictures' size.
func decode(t *testing.T, b []byte) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not a PNG image: %v", err)
	}
	if r := img.Bounds(); r.Dx() < 600 || r.Dy() < 400 {
		t.Fatalf("image of %v, want at least 600×400", r)
	}
	return img
}

// pixels counts the pixels of img that are exactly c.
func pixels(img image.Image, c color.Color) int {
	cr, cg, cb, ca := c.RGBA()
	n := 0
	r := img.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			pr, pg, pb, pa := img.At(x, y).RGBA()
			if pr == cr && pg == cg && pb == cb && pa == ca {
				n++
			}
		}
	}
	return n
}

// TestCDFWritesPNGWithSeries: the latency picture is a PNG image with a
// line in each measured series' colour; a series without samples draws
// nothing (its colour is absent).
func TestCDFWritesPNGWithSeries(t *testing.T) {
	p, err := CDF("ADD latency", "ms", []Series{
		{Name: "multinet", Values: []float64{50, 52, 61, 70}},
		{Name: "direct", Values: []float64{40, 41, 45}},
		{Name: "Multus thick", Values: nil},
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "add.png")
	if err := WritePNG(p, path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img := decode(t, b)
	for i, name := range []string{"multinet", "direct"} {
		if n := pixels(img, SeriesColor(i)); n < 50 {
			t.Errorf("series %s: %d pixels of its colour, want a line", name, n)
		}
	}
	if n := pixels(img, SeriesColor(2)); n != 0 {
		t.Errorf("series without samples: %d pixels of its colour, want none", n)
	}
	if got := label(Series{Name: "multinet", Values: []float64{1, 2}}); got != "multinet (n=2)" {
		t.Errorf("legend entry %q, want the name and sample size", got)
	}
}

// TestTimelineWritesPNG: the burst picture is a PNG image with a line per
// path, and its count axis is labelled with plain numbers.
func TestTimelineWritesPNG(t *testing.T) {
	p, err := Timeline("10 concurrent ADDs", "sandboxes attached", []Series{
		{Name: "multinet", Values: []float64{0.2, 0.1, 0.4}},
		{Name: "direct", Values: []float64{0.1, 0.3}},
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := PNG(p)
	if err != nil {
		t.Fatal(err)
	}
	img := decode(t, b)
	for i := range 2 {
		if n := pixels(img, SeriesColor(i)); n < 50 {
			t.Errorf("series %d: %d pixels of its colour, want a line", i, n)
		}
	}
	if p.Y.Label.Text != "sandboxes attached" || p.X.Label.Text != "seconds since the start" {
		t.Errorf("axes %q, %q", p.X.Label.Text, p.Y.Label.Text)
	}
	for _, tk := range p.Y.Tick.Marker.Ticks(0, 50) {
		if tk.Label != "" && tk.Label != "0" && tk.Label != "10" && tk.Label != "20" && tk.Label != "25" && tk.Label != "30" && tk.Label != "40" && tk.Label != "50" {
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
	if err := WritePNG(nil, filepath.Join(t.TempDir(), "x.png")); err == nil {
		t.Error("WritePNG(nil): no error")
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
