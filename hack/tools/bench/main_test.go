package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/multinet/multinet/internal/node/cniserver/api"
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

// TestPathsRotation: every path leads in turn and each appears once per
// iteration, with Multus when it is measured.
func TestPathsRotation(t *testing.T) {
	m, d, mu := &path{name: "multinet"}, &path{name: "direct"}, &path{name: "multus"}
	b := &bench{multinet: m, direct: d}
	if got := b.paths(1); len(got) != 2 || got[0] != d || got[1] != m {
		t.Errorf("without Multus, paths(1) = %v", names(got))
	}
	b.multusPath = mu
	first := map[string]bool{}
	for i := 0; i < 3; i++ {
		got := b.paths(i)
		if len(got) != 3 {
			t.Fatalf("paths(%d) = %v, want 3 paths", i, names(got))
		}
		seen := map[*path]bool{got[0]: true, got[1]: true, got[2]: true}
		if !seen[m] || !seen[d] || !seen[mu] {
			t.Errorf("paths(%d) = %v, want each path once", i, names(got))
		}
		first[got[0].name] = true
	}
	if len(first) != 3 {
		t.Errorf("leaders over 3 iterations: %v, want all three", first)
	}
}

func names(ps []*path) (out []string) {
	for _, p := range ps {
		out = append(out, p.name)
	}
	return out
}

// TestMarkdownMultus: with Multus measured, its column holds this run's
// figures (ADD overhead and ratio against direct, burst ratio); without,
// the report says it was not measured.
func TestMarkdownMultus(t *testing.T) {
	ms := func(v ...int) (d dist) {
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	r := &results{o: &options{multusBinDir: "/x"}, addDirect: ms(30, 30, 30), addMultinet: ms(40, 40, 40), delDirect: ms(10), delMultinet: ms(12),
		conc: []concResult{{n: 10, direct: ms(200), multinet: ms(300), multus: ms(500)}}}
	if out := r.markdown(); !strings.Contains(out, "not measured") || strings.Contains(out, "(measured in this run)") ||
		strings.Contains(out, "2.50×") {
		t.Errorf("without Multus, the report does not say it was not measured, or fills its column:\n%s", out)
	}
	r.multusPID = 42
	r.addMultus, r.delMultus = ms(60, 60, 60), ms(20)
	out := r.markdown()
	for _, want := range []string{"(measured in this run)", "+30.0, 2.00×", "+10.0, 2.00×", "0.50 s (2.50× direct)", "multus-daemon pid 42"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// TestStubDaemon: the stub daemon answers an ADD over its socket, and its
// conflist is the runtime's with socketPath pointing at it.
func TestStubDaemon(t *testing.T) {
	s, err := startStub(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	d, err := s.dialTimes(3, "/var/run/netns/x")
	if err != nil || len(d) != 3 {
		t.Fatalf("dialTimes = %v, %v", d, err)
	}
	// Its observer gives the view of exactly one ADD.
	if sp, ok := s.obs.take(api.CmdAdd); ok {
		t.Errorf("three ADDs taken as one: %+v", sp)
	}
	if _, err := s.dialTimes(1, "/var/run/netns/x"); err != nil {
		t.Fatal(err)
	}
	if sp, ok := s.obs.take(api.CmdAdd); !ok || sp.read <= 0 || sp.handler <= 0 {
		t.Errorf("one ADD: %+v, %v", sp, ok)
	}
	if sp, ok := s.obs.take(api.CmdDel); ok {
		t.Errorf("a DEL taken, none ran: %+v", sp)
	}
	rt, err := libcni.ConfListFromBytes([]byte(`{"cniVersion":"1.1.0","name":"multinet","plugins":[{"type":"multinet-shim","timeout":"90s"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.list(rt)
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(l.Plugins[0].Bytes, &p); err != nil {
		t.Fatal(err)
	}
	if l.CNIVersion != "1.1.0" || p["type"] != "multinet-shim" || p["socketPath"] != s.socket || p["timeout"] != "90s" {
		t.Errorf("stub conflist %s (cniVersion %s)", l.Plugins[0].Bytes, l.CNIVersion)
	}
}

// TestCgroupMemory reads this process's memory cgroup peak.
func TestCgroupMemory(t *testing.T) {
	peak, limit, err := cgroupMemory(os.Getpid())
	if err != nil {
		t.Fatalf("cgroupMemory: %v", err)
	}
	if peak <= 0 || limit < 0 {
		t.Errorf("peak %d, limit %d", peak, limit)
	}
}

// TestMultusDaemonConfig: multus-daemon's clusterNetwork is a directory
// holding only the default network conflist, not the conflist's path
// (given a .conflist path, Multus v4.3.0's DEL, as v4.2.3's, runs a lossy copy of it and
// leaks the default network's addresses: daemonConfig).
func TestMultusDaemonConfig(t *testing.T) {
	m, err := newMultus(fakeMultusBin(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	conflist := `{"cniVersion":"1.0.0","name":"containerd-net","plugins":[{"type":"bridge","ipam":{"type":"host-local","ranges":[[{"subnet":"10.244.0.0/24"}]]}}]}`
	if err := os.WriteFile(filepath.Join(dir, "10-containerd-net.conflist"), []byte(conflist), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := m.daemonConfig("1.0.0", dir, "/opt/cni/bin")
	cn, _ := cfg["clusterNetwork"].(string)
	if fi, err := os.Stat(cn); err != nil || !fi.IsDir() {
		t.Fatalf("clusterNetwork %q: want a directory (%v)", cn, err)
	}
	ents, _ := os.ReadDir(cn)
	if len(ents) != 1 {
		t.Fatalf("clusterNetwork dir holds %d files, want only the default network's conflist", len(ents))
	}
	if b, _ := os.ReadFile(filepath.Join(cn, ents[0].Name())); string(b) != conflist {
		t.Errorf("clusterNetwork dir's conflist = %s, want the default network's", b)
	}
	if cfg["cniDir"] != m.cniDir || cfg["binDir"] != "/opt/cni/bin" {
		t.Errorf("daemon config %v", cfg)
	}
}

func fakeMultusBin(t *testing.T) string {
	d := t.TempDir()
	for _, b := range []string{"multus-daemon", "multus-shim"} {
		if err := os.WriteFile(filepath.Join(d, b), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// TestHostLocalDir: the default network's allocation dir is host-local's
// dataDir (default /var/lib/cni/networks) joined with the network's name.
func TestHostLocalDir(t *testing.T) {
	for _, tc := range []struct{ conf, want string }{
		{`{"cniVersion":"1.0.0","name":"containerd-net","plugins":[{"type":"bridge","ipam":{"type":"host-local","ranges":[[{"subnet":"10.244.0.0/24"}]]}},{"type":"portmap","capabilities":{"portMappings":true}}]}`,
			"/var/lib/cni/networks/containerd-net"},
		{`{"cniVersion":"0.3.1","name":"kindnet","plugins":[{"type":"ptp","ipam":{"type":"host-local","dataDir":"/run/cni-ipam-state"}}]}`,
			"/run/cni-ipam-state/kindnet"},
		{`{"cniVersion":"1.0.0","name":"x","plugins":[{"type":"bridge","ipam":{"type":"dhcp"}}]}`, ""},
	} {
		l, err := libcni.ConfListFromBytes([]byte(tc.conf))
		if err != nil {
			t.Fatal(err)
		}
		if got := hostLocalDir(l); got != tc.want {
			t.Errorf("hostLocalDir(%s) = %q, want %q", l.Name, got, tc.want)
		}
	}
}

// TestCheckReleased: an address of the default network still owned by a
// path's container after its DEL is counted against that path, removed,
// marked FAILED in the table and fails the run; others' files stay.
func TestCheckReleased(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	leaked, released, other := newContainerID(), newContainerID(), "0123456789abcdef"
	write("10.244.0.7", leaked+"\r\neth0") // host-local's format: owner, CRLF, interface
	write("10.244.0.9", other+"\r\neth0")
	write("last_reserved_ip.0", "10.244.0.9")
	write("lock", "")
	mu := &path{name: "multus"}
	b := &bench{defaultIPAMDir: dir, res: &results{o: &options{}}, multusPath: mu, stubPath: &path{name: "stub"}}
	b.checkReleased(b.stubPath, &sandbox{containerID: leaked})
	if b.res.leaked["stub"] != 0 {
		t.Errorf("the stub path was checked")
	}
	b.checkReleased(mu, &sandbox{containerID: released}, &sandbox{containerID: leaked})
	if b.res.leaked["multus"] != 1 {
		t.Errorf("leaked = %v, want multus: 1", b.res.leaked)
	}
	if _, err := os.Stat(filepath.Join(dir, "10.244.0.7")); !os.IsNotExist(err) {
		t.Errorf("the leaked allocation was not removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "10.244.0.9")); err != nil {
		t.Errorf("another container's allocation was touched: %v", err)
	}
	if f := b.res.failures(); len(f) != 1 || !strings.Contains(f[0], "multus") {
		t.Errorf("failures() = %v, want the multus leak", f)
	}
	b.res.multusPID = 1
	if out := b.res.markdown(); !strings.Contains(out, "| 0 | 0 | **FAILED**: 1 | 0 |") {
		t.Errorf("the table does not mark the leak:\n%s", out)
	}
	b.res.leaked = nil
	if f := b.res.failures(); len(f) != 0 {
		t.Errorf("failures() = %v without a leak", f)
	}
}
