package metricsserver

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// /healthz answers ok; /readyz follows the readiness function; /metrics
// serves the registry, with the Go and process collectors; a bound address
// is an error.
func TestStart(t *testing.T) {
	addr := freeAddr(t)
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "multinet_test_total", Help: "test"})
	reg, err := NewRegistry(c)
	if err != nil {
		t.Fatal(err)
	}
	c.Inc()
	var ready atomic.Bool
	s, err := Start(context.Background(), addr, reg, func() error {
		if !ready.Load() {
			return errors.New("informers not synced")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	base := "http://" + addr
	if code, body := get(t, base+"/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	if code, body := get(t, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "informers not synced") {
		t.Errorf("/readyz not ready = %d %q", code, body)
	}
	ready.Store(true)
	if code, body := get(t, base+"/readyz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/readyz ready = %d %q", code, body)
	}
	code, body := get(t, base+"/metrics")
	if code != http.StatusOK || !strings.Contains(body, "multinet_test_total 1") || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics = %d, body lacks the counter or the Go collector:\n%.500s", code, body)
	}
	if _, err := Start(context.Background(), addr, reg, nil); err == nil {
		t.Error("Start on a bound address succeeded")
	}
}

// Run with an empty address serves nothing; with one it serves until stop.
func TestRun(t *testing.T) {
	stop, err := Run(context.Background(), "", prometheus.NewRegistry(), nil)
	if err != nil || stop == nil {
		t.Fatalf("Run(\"\") = stop nil %v, %v", stop == nil, err)
	}
	stop()
	addr := freeAddr(t)
	stop, err = Run(context.Background(), addr, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := get(t, "http://"+addr+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz = %d", code)
	}
	stop()
	if _, err := http.Get("http://" + addr + "/healthz"); err == nil {
		t.Error("still serving after stop")
	}
}
