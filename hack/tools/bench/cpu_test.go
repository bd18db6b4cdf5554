package main

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestParseProcStat reads utime+stime and cutime+cstime (10 ms ticks),
// also when the command holds spaces and parentheses.
func TestParseProcStat(t *testing.T) {
	in := "4242 (multi) net (x)) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 7 3 20 0 12 0 100 1000 200\n"
	got, err := parseProcStat([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if got.self != 3*time.Second || got.children != 100*time.Millisecond {
		t.Errorf("parseProcStat = %+v, want self 3s, children 100ms", got)
	}
	for _, bad := range []string{"4242 no paren", "1 (x) S 1 2 3", "1 (x) S 1 1 1 0 -1 0 0 0 0 0 a 0 0 0 0"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parseProcStat(%q): no error", bad)
		}
	}
	// This process's own line parses, and its time does not go back.
	a, err := readProcCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
	}
	b, err := readProcCPU(os.Getpid())
	if err != nil || b.self < a.self {
		t.Errorf("readProcCPU: %+v then %+v (%v)", a, b, err)
	}
}

// pidsOf and childrenOf find this test process and a child of it.
func TestPidsOfChildrenOf(t *testing.T) {
	cmd := exec.Command("/bin/sleep", "5")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if got := childrenOf(os.Getpid()); !slices.Contains(got, cmd.Process.Pid) {
		t.Errorf("childrenOf(self) = %v, want %d among them", got, cmd.Process.Pid)
	}
	if got := pidsOf("sleep"); !slices.Contains(got, cmd.Process.Pid) {
		t.Errorf("pidsOf(sleep) = %v, want %d among them", got, cmd.Process.Pid)
	}
	if got := childrenOf(cmd.Process.Pid); len(got) != 0 {
		t.Errorf("sleep's children %v", got)
	}
}

// The API server's background rate comes from the direct and stub windows
// and is taken out of the API row of every path; the other rows are the
// windows' sums per operation.
func TestCPUUsePerOp(t *testing.T) {
	ms := time.Millisecond
	sample := func(at time.Duration, g [cpuGroups]time.Duration) cpuSample {
		return cpuSample{at: time.Unix(0, 0).Add(at), g: g}
	}
	use := map[string]*cpuUse{"multinet": {}, "direct": {}, "stub": {}}
	// direct: 10 ADDs in 1 s, the API server busy 20 ms (background).
	use["direct"].add(sample(0, [cpuGroups]time.Duration{}), sample(time.Second, [cpuGroups]time.Duration{cpuBenchChildren: 300 * ms, cpuAPI: 20 * ms}), 10)
	// stub: 10 ADDs in 1 s, API 20 ms.
	use["stub"].add(sample(0, [cpuGroups]time.Duration{}), sample(time.Second, [cpuGroups]time.Duration{cpuBenchChildren: 40 * ms, cpuAPI: 20 * ms}), 10)
	// multinet: 10 ADDs in 2 s: API 140 ms of which 40 background.
	use["multinet"].add(sample(0, [cpuGroups]time.Duration{}), sample(2*time.Second, [cpuGroups]time.Duration{
		cpuBenchChildren: 40 * ms, cpuDaemon: 50 * ms, cpuDaemonChildren: 300 * ms, cpuAPI: 140 * ms}), 10)
	bg := backgroundOf(use)
	if bg[cpuAPI] != 0.02 || bg[cpuCluster] != 0 || bg[cpuDaemon] != 0 {
		t.Fatalf("background = %v, want 0.02 for the API server only", bg)
	}
	m := use["multinet"]
	if got := m.perOp(cpuAPI, bg); got != 10*ms {
		t.Errorf("multinet API per op = %v, want 10ms", got)
	}
	if got := m.total(bg); got != 4*ms+5*ms+30*ms+10*ms {
		t.Errorf("multinet total = %v, want 49ms", got)
	}
	if got := use["direct"].total(bg); got != 30*ms {
		t.Errorf("direct total = %v, want 30ms", got)
	}
	tab := cpuTable("ADD", use)
	for _, want := range []string{"| CPU time per ADD (ms) | multinet | direct | stub |", "| **all the groups below** | 49.0 | 30.0 | 4.0 |", "multinet / direct, CPU time per ADD: 1.63×", "20.0 ms per second of wall time, and of the other cluster components, 0.0 ms/s"} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
	if cpuTable("DEL", nil) != "" {
		t.Error("a phase that did not run has a table")
	}
}

// timedExec adds up the plugin processes' time and starts again at take.
func TestTimedExec(t *testing.T) {
	e := newTimedExec()
	if _, err := e.ExecPlugin(context.Background(), "/bin/sleep", nil, []string{"PATH=/bin"}); err == nil {
		t.Fatal("sleep without an argument did not fail")
	}
	if _, err := e.ExecPlugin(context.Background(), "/bin/true", nil, []string{"PATH=/bin"}); err != nil {
		t.Fatal(err)
	}
	if d := e.take(); d <= 0 {
		t.Errorf("take = %v after two execs", d)
	}
	if d := e.take(); d != 0 {
		t.Errorf("second take = %v, want 0", d)
	}
}

// outsideParts: libcni = total − exec; shim = exec − the daemon's span;
// the rows compare means with the stub's.
func TestOutsideParts(t *testing.T) {
	ms := time.Millisecond
	var real, stub outsideParts
	real.add(20*ms, split{read: ms, queued: ms / 2, handler: 10 * ms, exec: 15 * ms})
	stub.add(5*ms, split{read: ms / 10, handler: ms / 10, exec: 3 * ms})
	if real.libcni[0] != 5*ms || real.shim[0] != 3500*time.Microsecond || real.read[0] != ms {
		t.Errorf("real parts %+v", real)
	}
	rows := outsideRows(real, stub)
	if len(rows) != 3 || !strings.Contains(rows[0][1], "real − stub, mean +3.00") || !strings.Contains(rows[2][1], "+0.90") {
		t.Errorf("rows %q", rows)
	}
	if outsideRows(real, outsideParts{}) != nil {
		t.Error("rows without the stub's parts")
	}
}
