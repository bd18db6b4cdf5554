package main

import (
	"fmt"
	"math"
	"slices"
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

// triple formats p50 / p90 / p99 in ms.
func (d dist) triple() string {
	if len(d) == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%s / %s / %s", ms(d.pct(50)), ms(d.pct(90)), ms(d.pct(99)))
}

// secs formats a duration in seconds with two decimals.
func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// mib formats bytes in MiB.
func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
