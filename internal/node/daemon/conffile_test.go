package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/multinet/multinet/pkg/spec/netconf"
)

const ownFile = "00-multinet.conflist"

// renderedConf is the part of multinet's conflist the runtime reads.
type renderedConf struct {
	CNIVersion string `json:"cniVersion"`
	Name       string `json:"name"`
	Plugins    []struct {
		Type         string          `json:"type"`
		SocketPath   string          `json:"socketPath"`
		Timeout      string          `json:"timeout"`
		Capabilities map[string]bool `json:"capabilities"`
	} `json:"plugins"`
}

func decodeConf(t *testing.T, b []byte) renderedConf {
	t.Helper()
	var c renderedConf
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("multinet's conflist %s: %v", b, err)
	}
	if len(c.Plugins) != 1 {
		t.Fatalf("multinet's conflist has %d plugins, want 1", len(c.Plugins))
	}
	return c
}

// The rendered conflist mirrors the default network's cniVersion and the
// union of its plugins' true capabilities (so the runtime passes the
// runtimeConfig the default network can use, §7.5), and points the shim at
// the socket with its timeout.
func TestConfFileRender(t *testing.T) {
	tests := []struct {
		name, list string
		wantVer    string
		wantCaps   map[string]bool
	}{
		{
			name:     "capabilities of every plugin",
			list:     `{"cniVersion":"1.0.0","name":"def","plugins":[{"type":"bridge","capabilities":{"portMappings":true,"bandwidth":false}},{"type":"portmap","capabilities":{"portMappings":true}},{"type":"tuning","capabilities":{"mac":true}}]}`,
			wantVer:  "1.0.0",
			wantCaps: map[string]bool{"portMappings": true, "mac": true},
		},
		{
			name:    "no capabilities",
			list:    `{"cniVersion":"0.4.0","name":"def","plugins":[{"type":"bridge"}]}`,
			wantVer: "0.4.0",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			list, err := libcni.ConfListFromBytes([]byte(tt.list))
			if err != nil {
				t.Fatal(err)
			}
			f := &confFile{path: "/x/" + ownFile, socketPath: "/run/multinet/d.sock", shimTimeout: 2 * time.Minute}
			out, err := f.render(list)
			if err != nil {
				t.Fatal(err)
			}
			c := decodeConf(t, out)
			p := c.Plugins[0]
			if c.CNIVersion != tt.wantVer || c.Name != "multinet" || p.Type != netconf.ShimType || p.SocketPath != "/run/multinet/d.sock" || p.Timeout != "2m0s" {
				t.Errorf("rendered %s", out)
			}
			if !reflect.DeepEqual(p.Capabilities, tt.wantCaps) {
				t.Errorf("capabilities = %v, want %v", p.Capabilities, tt.wantCaps)
			}
			if _, err := libcni.ConfListFromBytes(out); err != nil {
				t.Errorf("rendered conflist does not load in libcni: %v", err)
			}
		})
	}
}

// confEnv is a CNI conf dir with a default network file and a confFile
// whose default network is found the way Run finds it.
type confEnv struct {
	t     *testing.T
	dir   string
	ready atomic.Bool
	f     *confFile
}

func newConfEnv(t *testing.T) *confEnv {
	t.Helper()
	dir := t.TempDir()
	cfg := Defaults()
	cfg.CNIConfDir = dir
	cfg.DefaultNetwork.ConfDir = dir
	onDisk := netconf.NewConfDir(netconf.ConfDirOptions{Dir: dir, SkipFile: ownFile})
	e := &confEnv{t: t, dir: dir}
	e.f = &confFile{
		path:           filepath.Join(dir, ownFile),
		socketPath:     "/run/multinet/d.sock",
		shimTimeout:    time.Minute,
		defaultNetwork: defaultNetworkFunc(cfg, onDisk, nil, time.Second, netconf.NewResolver(onDisk, 0)),
		ready: func() error {
			if !e.ready.Load() {
				return errors.New("informers not synced")
			}
			return nil
		},
		watchDirs: []string{dir},
		trigger:   make(chan struct{}, 1),
	}
	return e
}

// writeDefault writes the default network's file 10-default.conflist.
func (e *confEnv) writeDefault(cniVersion string, caps string) {
	e.t.Helper()
	c := `{"cniVersion":"` + cniVersion + `","name":"default-net","plugins":[{"type":"bridge","capabilities":{` + caps + `}}]}`
	if err := os.WriteFile(filepath.Join(e.dir, "10-default.conflist"), []byte(c), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// own reads multinet's file; nil when it does not exist.
func (e *confEnv) own() []byte {
	e.t.Helper()
	b, err := os.ReadFile(e.f.path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// Readiness (§6.1): the file is written only once the daemon is ready and
// the default network's config exists, atomically (no temp file left, mode
// 0644), not rewritten when unchanged, and the default network is never
// multinet's own file, though it sorts first.
func TestConfFileSync(t *testing.T) {
	e := newConfEnv(t)
	sync := func(wantOK bool) {
		t.Helper()
		ok, err := e.f.sync()
		if err != nil || ok != wantOK {
			t.Fatalf("sync = %v, %v; want %v", ok, err, wantOK)
		}
	}

	e.writeDefault("1.0.0", `"portMappings":true`)
	sync(false) // not ready
	if e.own() != nil {
		t.Fatal("file written before the daemon is ready")
	}

	e.ready.Store(true)
	if err := os.Remove(filepath.Join(e.dir, "10-default.conflist")); err != nil {
		t.Fatal(err)
	}
	sync(false) // no default network
	if e.own() != nil {
		t.Fatal("file written without a default network")
	}

	e.writeDefault("1.0.0", `"portMappings":true`)
	sync(true)
	c := decodeConf(t, e.own())
	if c.CNIVersion != "1.0.0" || !c.Plugins[0].Capabilities["portMappings"] {
		t.Errorf("written %+v, want the default network's cniVersion and capabilities", c)
	}
	st, err := os.Stat(e.f.path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", st.Mode().Perm())
	}
	entries, err := os.ReadDir(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Errorf("conf dir holds %d files, want the default's and multinet's (no temp files)", len(entries))
	}

	// Unchanged: not rewritten (same inode). multinet's file, lexically
	// first, is still not taken as the default network.
	ino := st.Sys().(*syscall.Stat_t).Ino
	sync(true)
	st, err = os.Stat(e.f.path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Sys().(*syscall.Stat_t).Ino != ino {
		t.Error("unchanged file was rewritten")
	}

	// The default network changes: rewritten with its new version.
	e.writeDefault("0.4.0", `"bandwidth":true`)
	sync(true)
	c = decodeConf(t, e.own())
	if c.CNIVersion != "0.4.0" || !c.Plugins[0].Capabilities["bandwidth"] || c.Plugins[0].Capabilities["portMappings"] {
		t.Errorf("after the default network changed: %+v", c)
	}

	// The default network's file goes away: multinet's file stays as it is
	// (removing it would let pods start without multinet).
	before := e.own()
	if err := os.Remove(filepath.Join(e.dir, "10-default.conflist")); err != nil {
		t.Fatal(err)
	}
	sync(false)
	if got := e.own(); string(got) != string(before) {
		t.Errorf("file changed to %q without a default network", got)
	}
}

// run writes the file once ready (trigger), calls written once, rewrites it
// when the default network's file changes (fsnotify: the resync is an hour)
// and leaves it in place when its context ends.
func TestConfFileRun(t *testing.T) {
	e := newConfEnv(t)
	e.writeDefault("1.0.0", "")
	var mu sync.Mutex
	written := 0
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.f.run(ctx, time.Hour, func() { mu.Lock(); written++; mu.Unlock() })
	}()
	t.Cleanup(func() { cancel(); <-done })

	time.Sleep(100 * time.Millisecond)
	if e.own() != nil {
		t.Fatal("file written before the daemon is ready")
	}
	e.ready.Store(true)
	e.f.trigger <- struct{}{}
	e.waitVersion("1.0.0")
	e.writeDefault("0.4.0", `"mac":true`)
	e.waitVersion("0.4.0") // through fsnotify: the resync is an hour
	mu.Lock()
	if written != 1 {
		t.Errorf("written called %d times, want once", written)
	}
	mu.Unlock()

	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
	if e.own() == nil {
		t.Error("file removed when run stopped")
	}
}

// waitVersion waits up to 5 s for multinet's file to carry cniVersion v.
func (e *confEnv) waitVersion(v string) {
	e.t.Helper()
	timeout := time.After(5 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if b := e.own(); b != nil && decodeConf(e.t, b).CNIVersion == v {
			return
		}
		select {
		case <-timeout:
			e.t.Fatalf("multinet's file never got cniVersion %s: %s", v, e.own())
		case <-tick.C:
		}
	}
}

// remove (removeCNIConfigOnExit, for uninstall) deletes multinet's own file,
// leaves the default network's config, treats a missing file as done, and
// refuses a file at that path that is not multinet's.
func TestConfFileRemove(t *testing.T) {
	e := newConfEnv(t)
	e.writeDefault("1.0.0", "")
	e.ready.Store(true)
	if ok, err := e.f.sync(); !ok || err != nil {
		t.Fatalf("sync = %v, %v", ok, err)
	}
	if err := e.f.remove(); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if e.own() != nil {
		t.Fatal("multinet's config file still there after remove")
	}
	if _, err := os.Stat(filepath.Join(e.dir, "10-default.conflist")); err != nil {
		t.Errorf("the default network's config is gone: %v", err)
	}
	if err := e.f.remove(); err != nil {
		t.Errorf("remove of a missing file: %v, want nil", err)
	}

	foreign := `{"cniVersion":"1.0.0","name":"other","plugins":[{"type":"bridge"}]}`
	if err := os.WriteFile(e.f.path, []byte(foreign), 0o644); err != nil {
		t.Fatal(err)
	}
	err := e.f.remove()
	if err == nil || !strings.Contains(err.Error(), "not multinet's") {
		t.Errorf("remove of a foreign file: %v, want a not-multinet's error", err)
	}
	if got := e.own(); string(got) != foreign {
		t.Errorf("foreign file changed to %q", got)
	}
}
