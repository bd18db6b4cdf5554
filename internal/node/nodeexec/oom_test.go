package nodeexec

import (
	"context"
	"fmt"
	"github.com/multinet/multinet/internal/testing/testskip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The test binary plays multinetd when this variable names a cgroup mode:
// it reads one line from stdin (so that it is placed first), then runs the
// probe with PROBE_ALLOC_MB through an Exec whose Cgroup is the root ("node")
// or nil ("none"), and prints "ok" or the error.
const daemonModeEnv = "NODEEXEC_TEST_DAEMON"

func init() {
	MaybeServeLauncher()
	mode := os.Getenv(daemonModeEnv)
	if mode == "" {
		return
	}
	var line [1]byte
	_, _ = os.Stdin.Read(line[:])
	e := &Exec{}
	if mode == "node" {
		cg, err := NewCgroup("/", "/")
		if err == nil {
			e.Launcher, err = NewLauncher([]string{os.Args[0]}, cg)
		}
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(0)
		}
		defer e.Launcher.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.ExecPlugin(ctx, os.Getenv("NODEEXEC_TEST_PROBE"), []byte("{}"), []string{"PROBE_ALLOC_MB=160"}); err != nil {
		fmt.Println("error:", err)
	} else {
		fmt.Println("ok")
	}
	os.Exit(0)
}

// memoryLimit sets a memory (and memory+swap) limit on cgroup path in the
// memory hierarchy under /sys/fs/cgroup.
func memoryLimit(t *testing.T, path string, bytes int64) {
	t.Helper()
	dir := filepath.Join("/sys/fs/cgroup/memory", path)
	for _, f := range []string{"memory.limit_in_bytes", "memory.memsw.limit_in_bytes"} {
		p := filepath.Join(dir, f)
		if _, err := os.Stat(p); err != nil {
			continue
		}
		if err := os.WriteFile(p, []byte(fmt.Sprint(bytes)), 0); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
}

// TestDaemonMemoryLimitDoesNotKillDelegates: a "daemon" in a cgroup limited
// to 64 MiB runs a delegate that needs 160 MiB. Placed in the node's root
// cgroup, the delegate succeeds; left in the daemon's cgroup (delegateCgroup
// none), the limit kills it.
func TestDaemonMemoryLimitDoesNotKillDelegates(t *testing.T) {
	requireRoot(t)
	if _, err := os.Stat("/sys/fs/cgroup/memory/memory.limit_in_bytes"); err != nil {
		testskip.Skip(t, "needs the cgroup v1 memory controller at /sys/fs/cgroup/memory")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mode, want string
	}{
		{"node", "ok"},
		{"none", "error:"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			path := testCgroup(t)
			memoryLimit(t, path, 64<<20)
			limited, err := NewCgroup("/", path)
			if err != nil {
				t.Fatal(err)
			}
			// The daemon stand-in is born in its (limited) cgroup.
			launcher := &Exec{Launcher: testLauncher(t, limited)}
			env := append(os.Environ(), daemonModeEnv+"="+tc.mode, "NODEEXEC_TEST_PROBE="+probeBin)
			out, err := launcher.ExecPlugin(testCtx(t), self, []byte("\n"), env)
			if err != nil {
				t.Fatalf("daemon stand-in: %v", err)
			}
			got := strings.TrimSpace(string(out))
			t.Logf("daemon stand-in said: %s", got)
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("delegate cgroup %s, daemon limited to 64 MiB, delegate needs 160 MiB: %q, want %q", tc.mode, got, tc.want)
			}
		})
	}
}
