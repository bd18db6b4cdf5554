package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

// timedExec is libcni's default plugin executor (the one
// libcni.NewCNIConfigWithCacheDir uses when given none) that adds up the
// wall time of the plugin processes it runs: fork/exec to exit, their
// output read. An operation's time minus it is libcni's own work around
// the plugins (config injection, result parsing, the result cache file).
type timedExec struct {
	invoke.Exec

	mu  sync.Mutex
	sum time.Duration
}

func newTimedExec() *timedExec {
	return &timedExec{Exec: &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: os.Stderr}, PluginDecoder: version.PluginDecoder{}}}
}

// ExecPlugin implements invoke.Exec.
func (e *timedExec) ExecPlugin(ctx context.Context, pluginPath string, stdinData []byte, environ []string) ([]byte, error) {
	start := time.Now()
	out, err := e.Exec.ExecPlugin(ctx, pluginPath, stdinData, environ)
	d := time.Since(start)
	e.mu.Lock()
	e.sum += d
	e.mu.Unlock()
	return out, err
}

// take returns the plugin processes' time since the last take, and starts
// again from zero.
func (e *timedExec) take() time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	d := e.sum
	e.sum = 0
	return d
}

// outsideParts split the time of ADDs outside the daemon's handler (the
// runtime's libcni running multinet-shim, which asks multinetd or the stub
// daemon) into three parts, per ADD:
//   - libcni: the operation's time minus the plugin process's (timedExec):
//     libcni's own work around the shim;
//   - shim: the shim process's time minus the daemon's span of the request
//     (read + queued + handler): fork/exec, the shim's start-up, connect and
//     send, then reading the response, printing the result and exiting;
//   - read: the daemon from accepting the connection to the request read
//     and decoded (multinet_cni_request_read_seconds).
//
// What is left of "outside" is queued (the slot, its own row).
type outsideParts struct{ libcni, shim, read dist }

func (o *outsideParts) add(total time.Duration, sp split) {
	o.libcni = append(o.libcni, total-sp.exec)
	o.shim = append(o.shim, sp.exec-sp.read-sp.queued-sp.handler)
	o.read = append(o.read, sp.read)
}

// outsideRows are the report rows comparing the parts of the operations through
// multinetd (real) with those through the stub daemon (floor): p50 and
// mean of each, and the difference of the means (means add up, medians do
// not).
func outsideRows(real, floor outsideParts) [][2]string {
	if len(real.libcni) == 0 || len(floor.libcni) == 0 {
		return nil
	}
	cell := func(d dist) string { return fmt.Sprintf("%s / %s", ms(d.median()), ms(d.mean())) }
	var out [][2]string
	for _, p := range []struct {
		name        string
		real, floor dist
	}{
		{"libcni's own work around the shim (the operation − the shim process)", real.libcni, floor.libcni},
		{"the shim process outside the daemon's span (exec, start-up, connect, send; read, print, exit)", real.shim, floor.shim},
		{"the daemon reading the request (accept → decoded)", real.read, floor.read},
	} {
		out = append(out, [2]string{p.name, fmt.Sprintf("%s; stub %s; real − stub, mean %+.2f",
			cell(p.real), cell(p.floor), float64(p.real.mean()-p.floor.mean())/float64(time.Millisecond))})
	}
	return out
}

// stubObserver is the stub daemon's cniserver.Observer: it keeps the view
// of the last operation of each command, as multinetd's histograms give it
// for the real daemon.
type stubObserver struct {
	mu   sync.Mutex
	last map[string]split
	n    map[string]int
}

func (o *stubObserver) OnStart(string) {}

func (o *stubObserver) OnDone(cmd string, read, queued, ran time.Duration, _ *types.Error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.last == nil {
		o.last, o.n = map[string]split{}, map[string]int{}
	}
	o.last[cmd] = split{read: read, queued: queued, handler: ran}
	o.n[cmd]++
}

// take returns the view of the one cmd answered since the last take of
// cmd, false when not exactly one was.
func (o *stubObserver) take(cmd string) (split, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s, ok := o.last[cmd], o.n[cmd] == 1
	delete(o.last, cmd)
	delete(o.n, cmd)
	return s, ok
}

// outsideLegend explains the rows of outsideRows.
var outsideLegend = strings.TrimSpace(`
- ADD and DEL outside the handler, by part: libcni runs each path's plugins through an executor that times the plugin
  processes (libcni's default executor, timed). For each ADD (and DEL) through multinet-shim, against multinetd ("real")
  and against the stub daemon ("stub"): libcni's own work = the operation − the shim process; the shim process
  outside the daemon's span = the shim process − (the daemon's read + queued + handler), that is fork/exec,
  the shim's start-up, connect and send, and after the answer reading it, printing the result and exiting;
  the daemon reading the request = its accept to the request decoded (multinetd:
  multinet_cni_request_read_seconds; the stub: the same server's Observer). p50 / mean in ms.`)
