package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// probeEnv makes this test binary, copied into a store as a plugin, report
// how it was run instead of running the tests.
const probeEnv = "CNI_MULTICALL_PROBE"

type probeReport struct {
	Args []string `json:"args"`
	Exe  string   `json:"exe"`
	Env  string   `json:"env"`
}

func TestMain(m *testing.M) {
	if os.Getenv(probeEnv) == "1" {
		exe, _ := os.Executable()
		_ = json.NewEncoder(os.Stdout).Encode(probeReport{Args: os.Args, Exe: exe, Env: os.Getenv("CNI_COMMAND")})
		os.Exit(7)
	}
	os.Exit(m.Run())
}

// buildDispatcher builds this command static, as cluster-up does.
func buildDispatcher(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "cni")
	c := exec.Command("go", "build", "-o", out, ".")
	c.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := c.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// release makes data/<name> of a k3s-like data dir: bin/cni (the
// dispatcher), bin/<plugin> -> cni for each plugin (relative links), and
// bin/.multicall/<plugin> (this test binary as the probe).
func release(t *testing.T, data, name, dispatcher string, plugins ...string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(data, name)
	copyFile(t, dispatcher, filepath.Join(dir, "bin", "cni"))
	for _, p := range plugins {
		if err := os.Symlink("cni", filepath.Join(dir, "bin", p)); err != nil {
			t.Fatal(err)
		}
		copyFile(t, self, filepath.Join(dir, "bin", ".multicall", p))
	}
	return dir
}

func runPlugin(t *testing.T, path string, args ...string) (probeReport, string, int) {
	t.Helper()
	c := exec.Command(path, args...)
	c.Env = append(os.Environ(), probeEnv+"=1", "CNI_COMMAND=ADD")
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %s: %v", path, err)
	}
	var r probeReport
	if code == 7 {
		if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
			t.Fatalf("%s: probe output %q: %v", path, stdout.String(), err)
		}
	}
	return r, stdout.String() + stderr.String(), code
}

// TestDispatchByArgv0: through the k3s layout (current an absolute link to a
// release dir, the plugin a relative link to the dispatcher) the plugin of
// the link's name runs with the same argv (argv[0] the link's path),
// environment and exit status; after current is re-pointed to another
// release, the same path runs that release's plugin.
func TestDispatchByArgv0(t *testing.T) {
	d := buildDispatcher(t)
	data := filepath.Join(t.TempDir(), "data")
	r1 := release(t, data, "release-1", d, "bridge", "host-local")
	current := filepath.Join(data, "current")
	if err := os.Symlink(r1, current); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"bridge", "host-local"} {
		link := filepath.Join(current, "bin", p)
		r, out, code := runPlugin(t, link, "a", "b c")
		if code != 7 {
			t.Fatalf("%s: exit %d, want the probe's 7: %s", link, code, out)
		}
		if want := []string{link, "a", "b c"}; strings.Join(r.Args, "|") != strings.Join(want, "|") {
			t.Errorf("%s: the plugin got argv %q, want %q", link, r.Args, want)
		}
		if want := filepath.Join(r1, "bin", ".multicall", p); r.Exe != want {
			t.Errorf("%s: ran %s, want %s", link, r.Exe, want)
		}
		if r.Env != "ADD" {
			t.Errorf("%s: CNI_COMMAND %q in the plugin, want ADD", link, r.Env)
		}
	}

	// An upgrade: current re-pointed to a new release.
	r2 := release(t, data, "release-2", d, "bridge")
	if err := os.Remove(current); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(r2, current); err != nil {
		t.Fatal(err)
	}
	r, out, code := runPlugin(t, filepath.Join(current, "bin", "bridge"))
	if code != 7 || r.Exe != filepath.Join(r2, "bin", ".multicall", "bridge") {
		t.Errorf("after re-pointing current: exit %d, ran %q, want release-2's bridge: %s", code, r.Exe, out)
	}
}

// TestDispatchRefuses: run as itself, or by a name with no plugin in the
// store, the dispatcher exits 1 with a CNI error result naming the problem
// on stdout.
func TestDispatchRefuses(t *testing.T) {
	d := buildDispatcher(t)
	data := filepath.Join(t.TempDir(), "data")
	r1 := release(t, data, "release-1", d, "bridge")
	if err := os.Symlink("cni", filepath.Join(r1, "bin", "macvlan")); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		filepath.Join(r1, "bin", "cni"):     "names no plugin",
		filepath.Join(r1, "bin", "macvlan"): `plugin \"macvlan\"`,
	} {
		_, out, code := runPlugin(t, path)
		if code != 1 || !strings.Contains(out, `"code":999`) || !strings.Contains(out, want) {
			t.Errorf("%s: exit %d, output %q; want 1 and a CNI error saying %s", path, code, out, want)
		}
	}
}
