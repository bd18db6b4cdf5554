package criruntime

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

var writeFixture = flag.Bool("write-fixture", false, "TestDiscoverRealContainerd: write the real containerd's verbose Status info to testdata/containerd-<version>.json")

// containerdBinary returns the containerd the local cluster runs, built by
// hack/lib/cluster.sh ensure_containerd (cached under
// ~/.cache/multinet/containerd/<version>/; the first build takes minutes).
// A build that fails fails the test.
func containerdBinary(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	repo := filepath.Join(filepath.Dir(file), "..", "..", "..")
	// ensure_containerd logs a build into _output/, which a fresh checkout lacks.
	if err := os.MkdirAll(filepath.Join(repo, "_output"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", `. hack/lib/cluster.sh && ensure_containerd >&2 && echo "$CONTAINERD_CACHE_DIR/containerd"`)
	cmd.Dir = repo
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/lib/cluster.sh ensure_containerd: %v\n%s", err, stderr.String())
	}
	bin := strings.TrimSpace(string(out))
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() {
		t.Fatalf("containerd binary %q: %v", bin, err)
	}
	return bin
}

// startContainerd starts a private containerd with the CRI plugin on a
// socket in dir, its CNI plugin dirs binDirs and conf dir confDir, and
// returns the socket's endpoint once the CRI answers Status. The process is
// stopped when the test ends.
func startContainerd(t *testing.T, bin, dir string, binDirs []string, confDir string) string {
	t.Helper()
	sock := filepath.Join(dir, "containerd.sock")
	quoted := make([]string, len(binDirs))
	for i, d := range binDirs {
		quoted[i] = `"` + d + `"`
	}
	config := `version = 3
root = "` + dir + `/root"
state = "` + dir + `/state"
imports = []
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.erofs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing", "io.containerd.nri.v1.nri"]
[grpc]
  address = "` + sock + `"
[ttrpc]
  address = "` + sock + `.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "` + dir + `/opt"
[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "native"
[plugins."io.containerd.cri.v1.runtime"]
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [` + strings.Join(quoted, ", ") + `]
    conf_dir = "` + confDir + `"
`
	cfgPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "containerd.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", cfgPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logFile.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("containerd's log:\n%s", b)
			}
		}
	})

	endpoint := "unix://" + sock
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := runtimeapi.NewRuntimeServiceClient(conn)
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-exited:
			t.Fatalf("containerd exited: %v", err)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := client.Status(ctx, &runtimeapi.StatusRequest{})
		cancel()
		if err == nil {
			return endpoint
		}
		if time.Now().After(deadline) {
			t.Fatalf("containerd's CRI did not answer Status within 60s: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestDiscoverRealContainerd: the containerd the local cluster runs,
// started privately (its own root, state and socket) with the CRI plugin and
// CNI bin_dirs and conf_dir of its own, reports them through the CRI as
// Discover reads them, with its name and version. Needs root (containerd
// mounts, chowns and owns its state); fails without it.
func TestDiscoverRealContainerd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root: runs a private containerd")
	}
	bin := containerdBinary(t)
	dir, err := os.MkdirTemp("", "criruntime-") // short: the socket path must fit in 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	binDirs := []string{filepath.Join(dir, "cni-bin"), "/opt/other/cni/bin"}
	confDir := filepath.Join(dir, "cni-net.d")
	endpoint := startContainerd(t, bin, dir, binDirs, confDir)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rt, err := Discover(ctx, endpoint)
	if err != nil {
		t.Fatalf("Discover(%s): %v", endpoint, err)
	}
	if rt.Name != "containerd" || !strings.HasPrefix(rt.Version, "v2.") {
		t.Errorf("runtime %q %q, want containerd v2.x", rt.Name, rt.Version)
	}
	if !slices.Equal(rt.CNI.BinDirs, binDirs) || rt.CNI.ConfDir != confDir {
		t.Errorf("CNI = %+v, want bin dirs %q and conf dir %q", rt.CNI, binDirs, confDir)
	}
	// The same through a plain socket path.
	if rt2, err := Discover(ctx, strings.TrimPrefix(endpoint, "unix://")); err != nil || !slices.Equal(rt2.CNI.BinDirs, binDirs) {
		t.Errorf("Discover(socket path) = %+v, %v", rt2, err)
	}

	if *writeFixture {
		conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		st, err := runtimeapi.NewRuntimeServiceClient(conn).Status(ctx, &runtimeapi.StatusRequest{Verbose: true})
		if err != nil {
			t.Fatal(err)
		}
		// Node paths as on a default install, not the test's temp dir.
		info := map[string]string{}
		for k, v := range st.Info {
			v = strings.ReplaceAll(v, filepath.Join(dir, "cni-bin"), "/opt/cni/bin")
			v = strings.ReplaceAll(v, `,"/opt/other/cni/bin"`, "")
			v = strings.ReplaceAll(v, confDir, "/etc/cni/net.d")
			v = strings.ReplaceAll(v, dir, "/var/lib/containerd-test")
			info[k] = v
		}
		b, err := json.MarshalIndent(info, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Join("testdata", "containerd-"+rt.Version+".json")
		if err := os.WriteFile(name, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", name)
	}
}
