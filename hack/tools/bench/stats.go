package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// dist is a sample of durations.
type dist []time.Duration

// pct returns the p-th percentile (nearest rank), 0 for an empty sample.
func (d dist) pct(p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	i = max(0, min(i, len(s)-1))
	return s[i]
}

// mean is the arithmetic mean, 0 for an empty sample.
func (d dist) mean() time.Duration {
	if len(d) == 0 {
		return 0
	}
	var t time.Duration
	for _, v := range d {
		t += v
	}
	return t / time.Duration(len(d))
}

// median is pct(50).
func (d dist) median() time.Duration { return d.pct(50) }

// ms formats a duration in milliseconds with one decimal.
func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }

// supports reports whether a sample of n values supports the p-th
// percentile: it has at least 100/(100−p) values, so that at least one value
// lies above the nearest rank (p50 from 2 values, p90 from 10, p99 from 100).
// Below that, the "percentile" would be the maximum under another name.
func supports(p float64, n int) bool { return float64(n)*(100-p) >= 100 }

// tail returns what to print for the p-th percentile: "p<p>" and its value
// when the sample supports it, else "max" and the maximum.
func (d dist) tail(p float64) (label string, v time.Duration) {
	if supports(p, len(d)) {
		return fmt.Sprintf("p%g", p), d.pct(p)
	}
	return "max", d.pct(100)
}

// q formats the p-th percentile as "p90 12.3" (ms), or "max 15.0" when the
// sample does not support it (supports).
func (d dist) q(p float64) string {
	label, v := d.tail(p)
	return label + " " + ms(v)
}

// triple formats p50, p90 and p99 in ms, each labelled, with the sample
// size: "p50 1.0 / p90 2.0 / p99 3.0 (n 100)"; from the first percentile the
// sample does not support on, one "max" stands for the rest
// ("p50 1.0 / p90 2.0 / max 3.0 (n 50)"). "n/a" for an empty sample.
func (d dist) triple() string {
	if len(d) == 0 {
		return "n/a"
	}
	var parts []string
	for _, p := range []float64{50, 90, 99} {
		s := d.q(p)
		parts = append(parts, s)
		if strings.HasPrefix(s, "max") {
			break
		}
	}
	return fmt.Sprintf("%s (n %d)", strings.Join(parts, " / "), len(d))
}

// secs formats a duration in seconds with two decimals.
func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// mib formats bytes in MiB.
func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
