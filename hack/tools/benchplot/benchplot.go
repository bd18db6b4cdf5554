// Package benchplot draws the benchmark's pictures with gonum.org/v1/plot:
// latency distributions as empirical cumulative distributions (CDF) and
// bursts of concurrent operations as timelines, written as SVG. Text is set
// in Liberation Sans, whose metrics gonum lays the picture out with, and the
// SVG names the fonts metric-compatible with it (Arimo, Arial, Helvetica) as
// fallbacks, so a viewer without Liberation Sans keeps the layout. It is
// tools code for hack/tools/bench (make bench), not part of the product.
package benchplot

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Series is one line of a picture: its legend name and its values (the
// unit is the caller's: milliseconds for a latency, seconds for a
// timeline). A series without values is left out of the picture.
type Series struct {
	Name   string
	Values []float64
}

// sans is the pictures' font: Liberation Sans, metric-compatible with
// Arial and Helvetica, which viewers have far more often than Liberation
// Serif (gonum's default) or a metric-compatible serif.
var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

// svgFamily is the font-family gonum writes for sans, and svgFallbacks what
// SVG replaces it with.
const (
	svgFamily    = "font-family:Liberation Sans;"
	svgFallbacks = "font-family:'Liberation Sans',Arimo,Arial,Helvetica,sans-serif;"
)

// Size of every picture.
const (
	width  = 20 * vg.Centimeter
	height = 12 * vg.Centimeter
)

// newPlot is plot.New with every text in sans.
func newPlot() *plot.Plot {
	p := plot.New()
	for _, st := range []*font.Font{&p.Title.TextStyle.Font, &p.X.Label.TextStyle.Font, &p.Y.Label.TextStyle.Font,
		&p.X.Tick.Label.Font, &p.Y.Tick.Label.Font, &p.Legend.TextStyle.Font} {
		st.Typeface, st.Variant = sans.Typeface, sans.Variant
	}
	return p
}

// label is a series' legend entry: its name and sample size.
func label(s Series) string { return fmt.Sprintf("%s (n=%d)", s.Name, len(s.Values)) }

// cdfPoints returns the empirical CDF of values as step points: for each
// value in ascending order, (value, fraction of values ≤ it). Its first
// point is (min, 0), so the line starts on the x axis.
func cdfPoints(values []float64) plotter.XYs {
	s := slices.Clone(values)
	slices.Sort(s)
	pts := make(plotter.XYs, 0, len(s)+1)
	pts = append(pts, plotter.XY{X: s[0], Y: 0})
	for i, v := range s {
		pts = append(pts, plotter.XY{X: v, Y: float64(i+1) / float64(len(s))})
	}
	return pts
}

// timelinePoints returns, for completion times (seconds from the start),
// the count of operations completed by each time as step points, from
// (0, 0).
func timelinePoints(times []float64) plotter.XYs {
	s := slices.Clone(times)
	slices.Sort(s)
	pts := make(plotter.XYs, 0, len(s)+1)
	pts = append(pts, plotter.XY{X: 0, Y: 0})
	for i, t := range s {
		pts = append(pts, plotter.XY{X: t, Y: float64(i + 1)})
	}
	return pts
}

// CDF draws each series' empirical cumulative distribution: x is the value
// (xLabel names its unit), y the fraction of the series' values at most x.
// It fails when no series has a value.
func CDF(title, xLabel string, series []Series) (*plot.Plot, error) {
	return draw(title, xLabel, "fraction of operations ≤ x", series, cdfPoints)
}

// Timeline draws, for each series of completion times (seconds from the
// start of a burst), how many of its operations had completed t seconds
// after the start. yLabel names what is counted. It fails when no series
// has a value.
func Timeline(title, yLabel string, series []Series) (*plot.Plot, error) {
	p, err := draw(title, "seconds since the start", yLabel, series, timelinePoints)
	if err != nil {
		return nil, err
	}
	p.Y.Tick.Marker = countTicks{}
	return p, nil
}

// countTicks are plot.DefaultTicks labelled as plain numbers ("50", not
// "50.00"), for counts.
type countTicks struct{}

func (countTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
		}
	}
	return ts
}

func draw(title, xLabel, yLabel string, series []Series, points func([]float64) plotter.XYs) (*plot.Plot, error) {
	p := newPlot()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	// Both kinds of line rise from the bottom left to the top right:
	// the bottom right corner is free for the legend.
	p.Legend.Top = false
	p.Legend.Left = false
	p.Legend.XOffs = -3 * vg.Millimeter
	p.Legend.YOffs = 3 * vg.Millimeter
	p.Add(plotter.NewGrid())
	drawn := 0
	for i, s := range series {
		if len(s.Values) == 0 {
			continue
		}
		l, err := plotter.NewLine(points(s.Values))
		if err != nil {
			return nil, fmt.Errorf("%s: series %s: %w", title, s.Name, err)
		}
		l.StepStyle = plotter.PostStep
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(label(s), l)
		drawn++
	}
	if drawn == 0 {
		return nil, fmt.Errorf("%s: no series has a value", title)
	}
	// Room to the right of the last step, so it is not on the frame.
	p.X.Max += (p.X.Max - p.X.Min) * 0.05
	return p, nil
}

// SVG renders p as an SVG document whose text names sans's fallbacks.
func SVG(p *plot.Plot) ([]byte, error) {
	w, err := p.WriterTo(width, height, "svg")
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if _, err := w.WriteTo(&b); err != nil {
		return nil, err
	}
	return bytes.ReplaceAll(b.Bytes(), []byte(svgFamily), []byte(svgFallbacks)), nil
}

// WriteSVG renders p as SVG into path (created or replaced, mode 0644).
func WriteSVG(p *plot.Plot, path string) error {
	if p == nil {
		return errors.New("benchplot: no plot")
	}
	b, err := SVG(p)
	if err != nil {
		return fmt.Errorf("render %s: %w", path, err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
