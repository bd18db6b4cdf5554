package nodeexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/multinet/multinet/internal/testing/cnitest"
)

// probeBin is the test probe plugin (internal/testing/cnitest/probe), built static
// so that it runs in a root holding nothing else.
var probeBin string

func TestMain(m *testing.M) {
	bin, remove, err := cnitest.BuildStatic("github.com/multinet/multinet/internal/testing/cnitest/probe", "probe")
	if err != nil {
		fmt.Fprintf(os.Stderr, "building the probe plugin: %v\n", err)
		os.Exit(1)
	}
	probeBin = bin
	code := m.Run()
	remove()
	os.Exit(code)
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (chroot, cgroups): run it as root")
	}
}

// nodeRoot makes a directory standing for the node's root file system: the
// probe at /opt/cni/bin/probe and a marker file at /etc/node-marker that
// exists nowhere else.
func nodeRoot(t *testing.T) (root, marker string) {
	t.Helper()
	root = t.TempDir()
	marker = "node-" + filepath.Base(root)
	for _, d := range []string{"opt/cni/bin", "etc", "proc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(probeBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "opt/cni/bin/probe"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/node-marker"), []byte(marker), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, marker
}

type probeReport struct {
	Argv0, Cwd, Cgroup, Path, Marker, Stdin string
}

func decodeReport(t *testing.T, out []byte) probeReport {
	t.Helper()
	var r probeReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("probe output %q: %v", out, err)
	}
	return r
}

// executors returns the two ways Exec starts plugins: from the daemon
// itself, and through a Launcher placed in the root cgroup.
func executors(t *testing.T, root string) map[string]*Exec {
	t.Helper()
	cg, err := NewCgroup("/", "/")
	if err != nil {
		t.Fatal(err)
	}
	return map[string]*Exec{"direct": {Root: root}, "launched": {Root: root, Launcher: testLauncher(t, cg)}}
}

func TestExecPluginRunsInTheNodeRoot(t *testing.T) {
	requireRoot(t)
	root, marker := nodeRoot(t)
	for name, e := range executors(t, root) {
		t.Run(name, func(t *testing.T) { checkNodeRoot(t, e, marker) })
	}
}

func checkNodeRoot(t *testing.T, e *Exec, marker string) {

	path, err := e.FindInPath("probe", []string{"/usr/lib/cni", "/opt/cni/bin"})
	if err != nil {
		t.Fatalf("FindInPath: %v", err)
	}
	if path != "/opt/cni/bin/probe" {
		t.Fatalf("FindInPath = %q, want the node path /opt/cni/bin/probe", path)
	}
	env := []string{"PATH=/container/only", "PROBE_READ_FILE=/etc/node-marker", "CNI_PATH=/opt/cni/bin"}
	out, err := e.ExecPlugin(testCtx(t), path, []byte(`{"cniVersion":"1.0.0"}`), env)
	if err != nil {
		t.Fatalf("ExecPlugin: %v", err)
	}
	r := decodeReport(t, out)
	if r.Marker != marker {
		t.Errorf("the plugin read %q from /etc/node-marker, want the node root's %q", r.Marker, marker)
	}
	if r.Cwd != "/" {
		t.Errorf("working directory %q, want / inside the node root", r.Cwd)
	}
	if r.Path != NodePATH {
		t.Errorf("PATH %q, want the node's %q", r.Path, NodePATH)
	}
	if r.Stdin != `{"cniVersion":"1.0.0"}` {
		t.Errorf("stdin %q", r.Stdin)
	}
}

func TestExecPluginHostRootIsPlainExec(t *testing.T) {
	for _, root := range []string{"", "/"} {
		e := &Exec{Root: root}
		path, err := e.FindInPath("probe", []string{filepath.Dir(probeBin)})
		if err != nil {
			t.Fatalf("root %q: FindInPath: %v", root, err)
		}
		wd, _ := os.Getwd()
		out, err := e.ExecPlugin(testCtx(t), path, nil, []string{"PATH=/keep"})
		if err != nil {
			t.Fatalf("root %q: ExecPlugin: %v", root, err)
		}
		r := decodeReport(t, out)
		if r.Path != "/keep" || r.Cwd != wd {
			t.Errorf("root %q: PATH %q cwd %q, want the caller's /keep and %q", root, r.Path, r.Cwd, wd)
		}
	}
}

func TestFindInPathErrors(t *testing.T) {
	root, _ := nodeRoot(t)
	if err := os.WriteFile(filepath.Join(root, "opt/cni/bin/noexec"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &Exec{Root: root}
	for _, tc := range []struct {
		plugin string
		paths  []string
		want   string
	}{
		{"", []string{"/opt/cni/bin"}, "no plugin name"},
		{"../probe", []string{"/opt/cni/bin"}, "invalid plugin name"},
		{"probe", nil, "no paths"},
		{"missing", []string{"/opt/cni/bin"}, `failed to find plugin "missing"`},
		{"noexec", []string{"/opt/cni/bin"}, `failed to find plugin "noexec"`},
		// The daemon's own /proc exists; the node root's does not hold it.
		{"probe", []string{filepath.Dir(probeBin)}, "failed to find plugin"},
	} {
		_, err := e.FindInPath(tc.plugin, tc.paths)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FindInPath(%q, %v) = %v, want an error with %q", tc.plugin, tc.paths, err, tc.want)
		}
	}
}

func TestExecPluginErrors(t *testing.T) {
	requireRoot(t)
	for name, e := range executors(t, "") {
		t.Run(name, func(t *testing.T) { checkErrors(t, e) })
	}
}

func checkErrors(t *testing.T, e *Exec) {
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cniErr := script("cni-error", `cat >/dev/null; echo '{"cniVersion":"1.0.0","code":11,"msg":"try again","details":"busy"}'; exit 1`)
	_, err := e.ExecPlugin(testCtx(t), cniErr, []byte("{}"), nil)
	var te *types.Error
	if !errors.As(err, &te) || te.Code != 11 || te.Msg != "try again" {
		t.Errorf("a plugin's CNI error: got %#v, want code 11 %q", err, "try again")
	}

	crash := script("crash", `cat >/dev/null; echo "boom on stderr" >&2; exit 3`)
	_, err = e.ExecPlugin(testCtx(t), crash, []byte("{}"), nil)
	if !errors.As(err, &te) || te.Code != types.ErrInternal || !strings.Contains(te.Msg, "boom on stderr") {
		t.Errorf("a crash: got %v, want an internal error with the stderr", err)
	}

	hang := script("hang", `exec sleep 30`)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err = e.ExecPlugin(ctx, hang, []byte("{}"), nil); err == nil {
		t.Error("a plugin that outlives its context: no error")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the plugin was not killed when its context ended (returned after %v)", d)
	}

	_, err = (&Exec{Root: t.TempDir(), Launcher: e.Launcher}).ExecPlugin(testCtx(t), "/opt/cni/bin/none", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "node's view") {
		t.Errorf("a missing plugin in the node root: %v, want a start error naming the node's view", err)
	}
}

// A helper that died is replaced on the next call.
func TestLauncherRestartsItsHelper(t *testing.T) {
	requireRoot(t)
	e := executors(t, "")["launched"]
	if _, err := e.ExecPlugin(testCtx(t), probeBin, nil, nil); err != nil {
		t.Fatalf("first run: %v", err)
	}
	e.Launcher.mu.Lock()
	old, exited := e.Launcher.proc.Process, e.Launcher.exited
	e.Launcher.mu.Unlock()
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	// Until the helper is reaped its end of the control socket may still
	// take a request (SIGKILL lands when the kernel next runs it).
	select {
	case <-exited:
	case <-testCtx(t).Done():
		t.Fatal("the killed helper was not reaped")
	}
	if _, err := e.ExecPlugin(testCtx(t), probeBin, nil, nil); err != nil {
		t.Fatalf("after the helper died: %v", err)
	}
	e.Launcher.mu.Lock()
	defer e.Launcher.mu.Unlock()
	if e.Launcher.proc == nil || e.Launcher.proc.Process.Pid == old.Pid {
		t.Error("no new helper was started")
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
