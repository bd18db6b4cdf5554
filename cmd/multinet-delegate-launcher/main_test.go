package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/multinet/multinet/internal/node/nodeexec"
)

// TestServesDelegates: multinetd's launcher, run from this small binary,
// starts a delegate and hands back its output (what multinetd's
// delegateExec does with it: nodeexec.LauncherCommand finds it next to the
// daemon's binary).
func TestServesDelegates(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (the launcher is moved into a cgroup): run it as root")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, nodeexec.LauncherBinary)
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if got := nodeexec.LauncherCommand(filepath.Join(dir, "multinetd")); got != bin {
		t.Fatalf("LauncherCommand = %s, want %s", got, bin)
	}
	cg, err := nodeexec.NewCgroup("/", "/")
	if err != nil {
		t.Fatal(err)
	}
	l, err := nodeexec.NewLauncher([]string{bin}, cg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e := &nodeexec.Exec{Launcher: l}
	out, err := e.ExecPlugin(ctx, "/bin/cat", []byte("network-status"), nil)
	if err != nil || string(out) != "network-status" {
		t.Errorf("delegate through the launcher: %q, %v", out, err)
	}
}

// TestRefusesToRunByHand: without the launcher argument it says what it is
// and exits 2.
func TestRefusesToRunByHand(t *testing.T) {
	bin := filepath.Join(t.TempDir(), nodeexec.LauncherBinary)
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "delegate launcher") {
		t.Errorf("run by hand: %v, %q; want exit 2 naming the delegate launcher", err, out)
	}
}
