package daemon

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/multinet/multinet/internal/node/cniserver/api"
)

// writeKubeconfig writes rc (certificates and impersonation, as
// apiservertest gives them) as a kubeconfig file in dir.
func writeKubeconfig(t *testing.T, dir string, rc *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: rc.CAData}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: rc.CertData, ClientKeyData: rc.KeyData,
		Impersonate: rc.Impersonate.UserName, ImpersonateGroups: rc.Impersonate.Groups,
	}
	kc.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "x"
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// multinetd, run as its ServiceAccount against a real API server, serves
// the shim's socket, writes the CNI config file once its informers have
// synced and the default network is there, and answers /readyz; when its
// context ends it removes the file (removeCNIConfigOnExit), stops serving
// the socket and the metrics address, and returns nil.
func TestRunServesThenStops(t *testing.T) {
	f := newClientFixture(t, "run", "node-run")
	t.Setenv(api.IPAMSocketEnv, "")
	dir := t.TempDir()
	confDir := filepath.Join(dir, "net.d")
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	defaultConf := `{"cniVersion":"1.0.0","name":"default","plugins":[{"type":"bridge"}]}`
	if err := os.WriteFile(filepath.Join(confDir, "10-default.conflist"), []byte(defaultConf), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := Defaults()
	cfg.NodeName = "node-run"
	cfg.Kubeconfig = writeKubeconfig(t, dir, f.rc)
	cfg.SocketPath = filepath.Join(dir, "multinet.sock")
	cfg.IPAMSocketPath = filepath.Join(dir, "ipam.sock")
	cfg.CNIConfDir = confDir
	cfg.CNIBinDirs = []string{filepath.Join(dir, "bin")}
	cfg.StateDir = filepath.Join(dir, "state")
	cfg.DevInfoRoot = filepath.Join(dir, "devinfo")
	cfg.PodResourcesSocket = ""
	cfg.RuntimeEndpoint = ""
	cfg.DelegateCgroup = "none"
	cfg.MetricsAddress = freeAddr(t)
	cfg.RemoveCNIConfigOnExit = true
	if err := cfg.Complete(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- Run(ctx, cfg) }()

	confFile := filepath.Join(confDir, cfg.ConfFileName)
	readyz := "http://" + cfg.MetricsAddress + "/readyz"
	err := wait.PollUntilContextTimeout(f.ctx, 50*time.Millisecond, 45*time.Second, true, func(context.Context) (bool, error) {
		select {
		case err := <-errc:
			return false, errors.Join(errors.New("Run returned early"), err)
		default:
		}
		if _, err := os.Stat(confFile); err != nil {
			return false, nil
		}
		resp, err := http.Get(readyz)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("waiting for the CNI config file and /readyz: %v", err)
	}
	for _, sock := range []string{cfg.SocketPath, cfg.IPAMSocketPath} {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatalf("%s not served: %v", sock, err)
		}
		c.Close()
	}

	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Run after its context ended: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return after its context ended")
	}
	if _, err := os.Stat(confFile); !os.IsNotExist(err) {
		t.Errorf("the CNI config file is still there (removeCNIConfigOnExit): %v", err)
	}
	for _, sock := range []string{cfg.SocketPath, cfg.IPAMSocketPath} {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			t.Errorf("%s still served after Run returned", sock)
		}
	}
	if resp, err := http.Get(readyz); err == nil {
		resp.Body.Close()
		t.Error("the metrics address still served after Run returned")
	}
}

// freeAddr is a loopback TCP address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
