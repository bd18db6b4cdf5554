package ipam

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	ipamv1 "github.com/multinet/multinet/api/ipam.multinet.io/v1alpha1"
)

// BenchmarkAllocate: latency of one Allocate against the real API server
// and the API requests it sends (requests/alloc, counted by a client-go
// transport wrapper), for one address (IPv4), two (IPv4 and IPv6), and the
// reuse of an IPAMClaim's addresses. The pool is a /16 that fills as the
// benchmark runs (released outside the timer every 200 allocations).
func BenchmarkAllocate(b *testing.B) {
	e := newEnv(b)
	ns := name(b, "ns")
	e.namespace(ns)
	for _, tc := range []struct {
		name, ranges string
		claim        bool
	}{
		{"ipv4", `"ranges":[[{"subnet":"10.50.0.0/16"}]]`, false},
		{"dual-stack", `"ranges":[[{"subnet":"10.51.0.0/16"}],[{"subnet":"fd51::/64"}]]`, false},
		{"claim-reuse", `"ranges":[[{"subnet":"10.52.0.0/16"}]]`, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := config(b, name(b, "p"), tc.ranges)
			var rc requestCounter
			a := e.allocator(b, "node-a", true, &rc)
			ctx := ctxT(b)
			if tc.claim {
				e.claim(ns, "bench")
				r := req(b, "claim-first", "net1")
				r.Pod, r.Claim = &PodRef{Namespace: ns, Name: "p"}, "bench"
				if _, err := a.Allocate(ctx, cfg, r); err != nil {
					b.Fatal(err)
				}
			}
			// Warm up: the API server's first write of a resource is slow.
			warm := req(b, "warm-up", "net1")
			if _, err := a.Allocate(ctx, cfg, warm); err != nil {
				b.Fatal(err)
			}
			var requests int64
			var lat []time.Duration
			var held []string
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				r := req(b, fmt.Sprintf("c%d", i), "net1")
				if tc.claim {
					r.Pod, r.Claim = &PodRef{Namespace: ns, Name: "p"}, "bench"
				}
				before := rc.n.Load()
				start := time.Now()
				if _, err := a.Allocate(ctx, cfg, r); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				requests += rc.n.Load() - before
				if !tc.claim {
					held = append(held, r.ContainerID)
				}
				if len(held) == 200 {
					b.StopTimer()
					for _, c := range held {
						if _, err := a.Release(ctx, c, "net1"); err != nil {
							b.Fatal(err)
						}
					}
					held = held[:0]
					b.StartTimer()
				}
			}
			b.ReportMetric(float64(requests)/float64(len(lat)), "requests/alloc")
			p50, p99 := percentiles(lat)
			b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
		})
	}
}

// BenchmarkAllocateConcurrent: 100 allocations at once across 3 nodes
// (each with its own clients and IPAllocation cache) from one /24 pool;
// per round: wall time, create conflicts and API requests per allocation.
// The pool is emptied between rounds, outside the timer.
func BenchmarkAllocateConcurrent(b *testing.B) {
	e := newEnv(b)
	const nodes, perRound = 3, 100
	cfg := config(b, name(b, "p"), `"ranges":[[{"subnet":"10.53.0.0/24"}]]`)
	var rc requestCounter
	var conflicts atomicCounter
	var as []*Allocator
	for n := range nodes {
		a := e.allocator(b, fmt.Sprintf("node-%d", n), true, &rc)
		a.OnConflict = conflicts.inc
		as = append(as, a)
	}
	ctx := ctxT(b)
	warm := req(b, "warm-up", "net1")
	if _, err := as[0].Allocate(ctx, cfg, warm); err != nil {
		b.Fatal(err)
	}
	if _, err := as[0].Release(ctx, warm.ContainerID, "net1"); err != nil {
		b.Fatal(err)
	}
	rounds := 0
	var wall time.Duration
	var requests int64
	for round := 0; b.Loop(); round++ {
		before := rc.n.Load()
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, perRound)
		for i := range perRound {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := as[i%nodes].Allocate(ctx, cfg, req(b, fmt.Sprintf("r%d-c%d", round, i), "net1")); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		wall += time.Since(start)
		requests += rc.n.Load() - before
		rounds++
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		b.StopTimer()
		for i := range perRound {
			if _, err := as[i%nodes].Release(ctx, name(b, fmt.Sprintf("r%d-c%d", round, i)), "net1"); err != nil {
				b.Fatal(err)
			}
		}
		// Let the caches see the pool empty again.
		for _, a := range as {
			for hasPool(a.Cache, cfg.Pool) {
				time.Sleep(5 * time.Millisecond)
			}
		}
		b.StartTimer()
	}
	allocs := float64(rounds * perRound)
	b.ReportMetric(float64(wall.Milliseconds())/float64(rounds), "ms/100-allocs")
	b.ReportMetric(float64(conflicts.get())/allocs, "conflicts/alloc")
	b.ReportMetric(float64(requests)/allocs, "requests/alloc")
}

func hasPool(c *Cache, pool string) bool {
	for _, o := range c.informer.GetStore().List() {
		if a, ok := o.(*ipamv1.IPAllocation); ok && a.Spec.Pool == pool {
			return true
		}
	}
	return false
}

func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2], s[min(len(s)-1, len(s)*99/100)]
}
