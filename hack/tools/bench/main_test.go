package main

import (
	"testing"
	"time"
)

func TestParseProm(t *testing.T) {
	in := []byte(`# HELP x y
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",resource="pods",subresource="status",verb="PATCH"} 13
apiserver_flowcontrol_dispatched_requests_total{flow_schema="multinet-bench-multinetd-04",priority_level="global-default"} 2.5e+01
weird{a="x\"y,z}",b="2"} 1 1700000000000
no_labels 7
broken{a="1" 3
`)
	s := parseProm(in)
	if len(s) != 4 {
		t.Fatalf("got %d samples, want 4: %+v", len(s), s)
	}
	if s[0].labels["subresource"] != "status" || s[0].value != 13 {
		t.Errorf("sample 0 = %+v", s[0])
	}
	if s[1].value != 25 {
		t.Errorf("sample 1 value = %v, want 25", s[1].value)
	}
	if s[2].labels["a"] != `x"y,z}` || s[2].labels["b"] != "2" || s[2].value != 1 {
		t.Errorf("sample 2 = %+v", s[2])
	}
	got := sumWhere(s, "apiserver_flowcontrol_dispatched_requests_total", func(l map[string]string) bool {
		return l["flow_schema"] == "multinet-bench-multinetd-04"
	})
	if got != 25 {
		t.Errorf("sumWhere = %v, want 25", got)
	}
}

func TestPercentiles(t *testing.T) {
	var d dist
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(101-i)*time.Millisecond)
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {90, 90 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}} {
		if got := d.pct(tc.p); got != tc.want {
			t.Errorf("pct(%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if d.mean() != 50500*time.Microsecond {
		t.Errorf("mean = %v", d.mean())
	}
	if (dist{}).pct(50) != 0 || (dist{}).triple() != "n/a" {
		t.Error("empty dist")
	}
}

func TestSub(t *testing.T) {
	a := map[apiKey]float64{{"GET", "pods"}: 3, {"POST", "events"}: 1}
	b := map[apiKey]float64{{"GET", "pods"}: 5, {"PATCH", "pods/status"}: 2}
	got := sub(a, b)
	want := map[apiKey]float64{{"GET", "pods"}: 2, {"PATCH", "pods/status"}: 2, {"POST", "events"}: -1}
	if len(got) != len(want) {
		t.Fatalf("sub = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("sub[%v] = %v, want %v", k, got[k], v)
		}
	}
}

func TestContainerID(t *testing.T) {
	id := newContainerID()
	if len(id) != 64 || id[:len(containerIDPrefix)] != containerIDPrefix {
		t.Errorf("newContainerID() = %q", id)
	}
}
