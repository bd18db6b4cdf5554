package nodeexec

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLauncherCommand: the small launcher binary next to the daemon's is
// used when it is an executable file; otherwise the daemon's own binary
// serves (MaybeServeLauncher).
func TestLauncherCommand(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "multinetd")
	if err := os.WriteFile(self, []byte("daemon"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := LauncherCommand(self); got != self {
		t.Errorf("no launcher binary: %s, want the daemon %s", got, self)
	}
	l := filepath.Join(dir, LauncherBinary)
	if err := os.WriteFile(l, []byte("launcher"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := LauncherCommand(self); got != self {
		t.Errorf("launcher binary not executable: %s, want the daemon %s", got, self)
	}
	if err := os.Chmod(l, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := LauncherCommand(self); got != l {
		t.Errorf("executable launcher binary: %s, want %s", got, l)
	}
	if err := os.Remove(l); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(l, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := LauncherCommand(self); got != self {
		t.Errorf("a directory of that name: %s, want the daemon %s", got, self)
	}
}
