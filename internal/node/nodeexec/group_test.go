package nodeexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Every delegate call is bounded (docs/decisions/nodeexec.md
// "A delegate's process group"): a process the delegate forked that holds
// its stdout does not keep the call open, and dies with the delegate's
// process group, whether the call's context ended or the delegate exited. A
// process the delegate left behind without its stdio, in its group or in a
// session of its own, is left alone, as when the runtime runs the plugin.
func TestExecPluginKillsTheDelegatesProcessGroup(t *testing.T) {
	requireRoot(t)
	for name, e := range executors(t, "") {
		t.Run(name, func(t *testing.T) {
			t.Run("context ends while a grandchild holds stdout", func(t *testing.T) {
				checkCancelledGroup(t, e, "sleep 1001 &", "1001", false)
			})
			t.Run("context ends while a daemon in its own session holds stdout", func(t *testing.T) {
				checkCancelledGroup(t, e, "setsid sleep 1005 &", "1005", true)
			})
			t.Run("delegate exits while a grandchild holds stdout", func(t *testing.T) {
				checkExitedGroup(t, e, "sleep 1002 &", "1002", false)
			})
			t.Run("delegate exits while a daemon in its own session holds stdout", func(t *testing.T) {
				checkExitedGroup(t, e, "setsid sleep 1006 &", "1006", true)
			})
			t.Run("delegate exits leaving a grandchild without its stdio", func(t *testing.T) {
				checkExitedGroup(t, e, "sleep 1003 </dev/null >/dev/null 2>&1 &", "1003", true)
			})
			t.Run("delegate exits leaving a daemon in its own session", func(t *testing.T) {
				checkExitedGroup(t, e, "setsid sleep 1004 </dev/null >/dev/null 2>&1 &", "1004", true)
			})
		})
	}
}

// checkCancelledGroup: a delegate that starts fork (a shell command line
// whose process holds the delegate's stdout), then hangs. Its context ends:
// the call returns the context's error; the delegate is gone, and so is the
// forked process unless it left the delegate's process group (outside).
func checkCancelledGroup(t *testing.T, e *Exec, fork, arg string, outside bool) {
	dir := t.TempDir()
	pidFile, selfFile := filepath.Join(dir, "pid"), filepath.Join(dir, "self")
	plugin := groupScript(t, dir, fmt.Sprintf("cat >/dev/null\necho $$ >%[1]s.tmp && mv %[1]s.tmp %[1]s\n%[2]s\necho $! >%[3]s.tmp && mv %[3]s.tmp %[3]s\nexec sleep 1000",
		selfFile, fork, pidFile))

	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := e.ExecPlugin(ctx, plugin, []byte("{}"), nil)
		done <- err
	}()
	self := readPID(t, selfFile, "1000")
	pid := readPID(t, pidFile, arg) // the delegate is running and has forked
	// The fork is what it should be when the context ends: "setsid sleep"
	// has left the delegate's session once it runs sleep (setsid exec's it
	// after setsid(2)). Before, the context could end while it was still
	// setsid in the delegate's group, and the group kill took it (5 runs of
	// 10 under a parallel build, make test-flakes).
	for deadline := time.Now().Add(10 * time.Second); !running(pid, arg); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d forked by the delegate is not sleep %s within 10 s", pid, arg)
		}
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("ExecPlugin after its context ended: %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ExecPlugin did not return within 30 s of its context ending: a process holding the delegate's stdout keeps the call open")
	}
	wantGone(t, self, "1000")
	if outside {
		if !running(pid, arg) {
			t.Errorf("pid %d (sleep %s), in a session of its own, was killed", pid, arg)
		}
		return
	}
	wantGone(t, pid, arg)
}

// checkExitedGroup: a delegate that answers and exits 0 after starting fork
// (a shell command line writing its child's pid to a file). The call
// returns the delegate's answer; the child is gone, or, with survives, is
// still running.
func checkExitedGroup(t *testing.T, e *Exec, fork, arg string, survives bool) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	const answer = `{"cniVersion":"1.0.0"}`
	plugin := groupScript(t, dir, fmt.Sprintf("cat >/dev/null\n%s\necho $! >%s\necho '%s'", fork, pidFile, answer))

	type ret struct {
		out []byte
		err error
	}
	done := make(chan ret, 1)
	go func() {
		out, err := e.ExecPlugin(testCtx(t), plugin, []byte("{}"), nil)
		done <- ret{out, err}
	}()
	select {
	case r := <-done:
		if r.err != nil || string(bytes.TrimSpace(r.out)) != answer {
			t.Errorf("ExecPlugin = %q, %v; want the delegate's answer %s", r.out, r.err, answer)
		}
	case <-time.After(30 * time.Second):
		readPID(t, pidFile, arg) // kill it at cleanup
		t.Fatal("ExecPlugin did not return within 30 s of the delegate's exit: a grandchild holding its stdout keeps the call open")
	}
	pid := readPID(t, pidFile, arg)
	if survives {
		// setsid may not have exec'd sleep yet.
		for deadline := time.Now().Add(5 * time.Second); !running(pid, arg); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("pid %d (sleep %s), which let go of the delegate's stdio, was killed", pid, arg)
			}
		}
		return
	}
	wantGone(t, pid, arg)
}

func groupScript(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "plugin")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// readPID waits for the pid the delegate wrote to file, and kills that
// process (when it is still "sleep arg") when the test ends.
func readPID(t *testing.T, file, arg string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(file)
		if err == nil && len(bytes.TrimSpace(b)) > 0 {
			pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
			if err != nil {
				t.Fatalf("pid file %s: %q", file, b)
			}
			t.Cleanup(func() {
				// Also while it is still "setsid sleep arg".
				cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				if err == nil && strings.HasSuffix(string(cmdline), "sleep\x00"+arg+"\x00") {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("the delegate wrote no pid to %s within 30 s", file)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// running reports whether pid is a live (not zombie) "sleep arg": a killed
// orphan stays a zombie until whoever adopts it reaps it.
func running(pid int, arg string) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || string(cmdline) != "sleep\x00"+arg+"\x00" {
		return false // gone, or the pid was reused
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// "pid (comm) S ...": the state follows the last ')'.
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return true
}

// wantGone fails the test unless pid ("sleep arg") stops running within a
// few seconds (SIGKILL is delivered asynchronously).
func wantGone(t *testing.T, pid int, arg string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for running(pid, arg) {
		if time.Now().After(deadline) {
			t.Errorf("pid %d (sleep %s), forked by the delegate, still runs after the call returned", pid, arg)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
