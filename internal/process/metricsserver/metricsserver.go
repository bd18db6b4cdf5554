// Package metricsserver serves a process's Prometheus metrics and health
// endpoints over plain HTTP: /metrics (a prometheus.Gatherer in the text
// exposition format), /healthz (the process is alive) and /readyz (a
// readiness function). multinetd, multinet-deviceplugin, multinet-dra-driver
// and multinet-ipam-cleanup serve through it (the webhook serves the same
// paths on its probes port with controller-runtime's healthz handlers).
// docs/decisions/observability.md "One metrics server".
package metricsserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"
)

// NewRegistry returns a registry of its own (never the global one) with
// the Go runtime and process collectors (go_*, process_*) and cs.
// Errors: a collector of cs is invalid or collides with another.
func NewRegistry(cs ...prometheus.Collector) (*prometheus.Registry, error) {
	r := prometheus.NewRegistry()
	all := append([]prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}, cs...)
	for _, c := range all {
		if err := r.Register(c); err != nil {
			return nil, fmt.Errorf("registering metrics: %w", err)
		}
	}
	return r, nil
}

// Start listens on addr (host:port; "127.0.0.1:9390" keeps it on the
// loopback, ":9393" every address of the network namespace) and serves
// /metrics from g, /healthz ("ok") and /readyz (ready's error as 503; nil
// ready: always ok) in a goroutine until the returned server is shut down.
// Serving errors after the start are logged with ctx's logger. Errors: addr
// cannot be bound.
func Start(ctx context.Context, addr string, g prometheus.Gatherer, ready func() error) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ready != nil {
			if err := ready(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics address: %w", err)
	}
	s := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := s.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "metrics server")
		}
	}()
	return s, nil
}

// Run serves as Start does ("" addr: serves nothing) until ctx ends, then
// shuts the server down within 5 s. It is for commands whose main work
// runs beside it; the returned stop function (never nil) waits for that.
// Errors: addr cannot be bound.
func Run(ctx context.Context, addr string, g prometheus.Gatherer, ready func() error) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	s, err := Start(ctx, addr, g, ready)
	if err != nil {
		return nil, err
	}
	klog.FromContext(ctx).Info("Serving metrics", "address", addr)
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(sctx)
	}, nil
}
