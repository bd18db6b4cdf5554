// Package apiservertest runs a real Kubernetes API server for tests: Debian's
// etcd (/usr/bin/etcd, package etcd-server) and the kube-apiserver the local
// cluster's scripts build (hack/lib/cluster.sh ensure_k8s_binaries, cached
// under ~/.cache/multinet/k8s/<version>/), each on free loopback ports, with
// their data, certificates and logs in a temporary directory that Stop
// removes. It never uses the local cluster's ports or _output/cluster.
//
// The API server has no controller manager: no garbage collector (no
// ownerReference cascade), no namespace deletion, no ServiceAccount tokens
// (the ServiceAccount admission plugin is off, so pods need no
// ServiceAccount). Authorization is RBAC; Config is a system:masters
// identity, and ConfigAs impersonates another user to test least privilege.
//
// A test package starts at most one server, on first use:
//
//	func TestMain(m *testing.M) { os.Exit(apiservertest.Main(m)) }
//	func TestX(t *testing.T) { cfg := apiservertest.Shared(t).Config() ... }
//
// When etcd or kube-apiserver is missing, Shared skips the test with the
// reason, unless MULTINET_REQUIRE_APISERVER=1 (make test-unit sets it): then
// it fails, so that a machine without them cannot pass the suite by skipping.
package apiservertest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/multinet/multinet/internal/testing/testskip"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"
)

// RequireEnv is the environment variable that turns a skip for missing
// binaries into a failure ("1").
const RequireEnv = "MULTINET_REQUIRE_APISERVER"

// DefaultK8sVersion is the kube-apiserver version looked up in the cache when
// K8S_VERSION is not set: the version the local cluster runs
// (hack/lib/cluster.sh K8S_VERSION).
const DefaultK8sVersion = "v1.37.2"

// Binaries returns the paths of etcd and kube-apiserver, or an error naming
// what is missing and how to get it. etcd: $MULTINET_ETCD, else etcd on PATH,
// else /usr/bin/etcd. kube-apiserver: $MULTINET_KUBE_APISERVER, else
// $MULTINET_CACHE_DIR (default ${XDG_CACHE_HOME:-$HOME/.cache}/multinet)
// /k8s/${K8S_VERSION:-DefaultK8sVersion}/kube-apiserver.
func Binaries() (etcd, apiserver string, err error) {
	etcd = os.Getenv("MULTINET_ETCD")
	if etcd == "" {
		if p, lerr := exec.LookPath("etcd"); lerr == nil {
			etcd = p
		} else {
			etcd = "/usr/bin/etcd"
		}
	}
	apiserver = os.Getenv("MULTINET_KUBE_APISERVER")
	if apiserver == "" {
		cache := os.Getenv("MULTINET_CACHE_DIR")
		if cache == "" {
			base := os.Getenv("XDG_CACHE_HOME")
			if base == "" {
				home, herr := os.UserHomeDir()
				if herr != nil {
					return "", "", fmt.Errorf("locating kube-apiserver: %w", herr)
				}
				base = filepath.Join(home, ".cache")
			}
			cache = filepath.Join(base, "multinet")
		}
		v := os.Getenv("K8S_VERSION")
		if v == "" {
			v = DefaultK8sVersion
		}
		apiserver = filepath.Join(cache, "k8s", v, "kube-apiserver")
	}
	var missing []string
	if fi, serr := os.Stat(etcd); serr != nil || fi.IsDir() {
		missing = append(missing, fmt.Sprintf("etcd (%s; Debian package etcd-server: make packages)", etcd))
	}
	if fi, serr := os.Stat(apiserver); serr != nil || fi.IsDir() {
		missing = append(missing, fmt.Sprintf("kube-apiserver (%s; built by make test-unit / make cluster-up: hack/lib/cluster.sh ensure_k8s_binaries)", apiserver))
	}
	if len(missing) > 0 {
		return etcd, apiserver, fmt.Errorf("missing %s", strings.Join(missing, " and "))
	}
	return etcd, apiserver, nil
}

// Server is a running etcd + kube-apiserver pair.
type Server struct {
	dir      string
	host     string // https://127.0.0.1:port
	caPEM    []byte
	certPEM  []byte
	keyPEM   []byte
	etcdURL  string
	procs    []*exec.Cmd
	stopOnce sync.Once
	stopped  chan struct{} // closed by Stop: ends the threads that started the processes
	apiLog   string
	etcdLog  string
}

// Options configure Start.
type Options struct {
	// CRDDir, when set, is a directory of CustomResourceDefinition YAML files
	// (one CRD per file, *.yaml except kustomization.yaml) installed and
	// waited for (Established) before Start returns. Default: the module's
	// deploy/crds.
	CRDDir string
	// NoCRDs skips installing CRDs.
	NoCRDs bool
	// Timeout bounds the start (processes, readiness, CRDs). Default 2 min.
	Timeout time.Duration
}

// Start starts etcd and kube-apiserver in a new temporary directory, waits
// until the API server is ready and the CRDs are established, and returns
// the Server. Stop it with Stop. Errors name the step and carry the tail of
// the failing process's log; nothing is left running on error.
func Start(ctx context.Context, opts Options) (*Server, error) {
	etcdBin, apiBin, err := Binaries()
	if err != nil {
		return nil, err
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	base := ""
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		base = "/dev/shm" // etcd's fsyncs are the API server's write latency
	}
	dir, err := os.MkdirTemp(base, "multinet-apiservertest-")
	if err != nil {
		return nil, fmt.Errorf("apiservertest: temp dir: %w", err)
	}
	s := &Server{dir: dir, apiLog: filepath.Join(dir, "kube-apiserver.log"), etcdLog: filepath.Join(dir, "etcd.log"), stopped: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			s.Stop()
		}
	}()
	if err := s.writePKI(); err != nil {
		return nil, err
	}
	if err := s.startEtcd(ctx, etcdBin); err != nil {
		return nil, err
	}
	if err := s.startAPIServer(ctx, apiBin); err != nil {
		return nil, err
	}
	if !opts.NoCRDs {
		crdDir := opts.CRDDir
		if crdDir == "" {
			root, err := moduleRoot()
			if err != nil {
				return nil, err
			}
			crdDir = filepath.Join(root, "deploy", "crds")
		}
		if err := s.installCRDs(ctx, crdDir); err != nil {
			return nil, err
		}
	}
	ok = true
	return s, nil
}

// Config returns a client configuration of a system:masters user (may do
// anything). Each call returns a new copy; QPS and Burst are raised so that
// client-side rate limiting does not shape test timings.
func (s *Server) Config() *rest.Config {
	return &rest.Config{
		Host: s.host,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   bytes.Clone(s.caPEM),
			CertData: bytes.Clone(s.certPEM),
			KeyData:  bytes.Clone(s.keyPEM),
		},
		QPS:   1000,
		Burst: 2000,
	}
}

// ConfigAs returns Config impersonating user (and groups): requests are
// authorized as that user, e.g. "system:serviceaccount:multinet-system:multinetd"
// with groups system:serviceaccounts and system:authenticated, to test RBAC.
func (s *Server) ConfigAs(user string, groups ...string) *rest.Config {
	c := s.Config()
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return c
}

// Dir is the server's temporary directory (logs: etcd.log, kube-apiserver.log).
func (s *Server) Dir() string { return s.dir }

// Stop kills both processes (SIGKILL to their process groups), waits for
// them and removes the directory. Safe to call more than once.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		for i := len(s.procs) - 1; i >= 0; i-- {
			p := s.procs[i]
			if p.Process != nil {
				_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
				_ = p.Wait()
			}
		}
		if s.dir != "" {
			_ = os.RemoveAll(s.dir)
		}
		if s.stopped != nil {
			close(s.stopped)
		}
	})
}

// moduleRoot is the directory of go.mod above this source file.
func moduleRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("apiservertest: cannot locate the module root")
	}
	dir := filepath.Dir(file)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("apiservertest: no go.mod above %s", file)
		}
		dir = parent
	}
}

// freePort returns a loopback TCP port nobody listened on a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("apiservertest: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs name in its own process group, output to logFile; the process
// is killed when the test binary dies (Pdeathsig).
func (s *Server) start(bin, logFile string, args ...string) (*exec.Cmd, error) {
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("apiservertest: log file: %w", err)
	}
	defer f.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = s.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// Pdeathsig comes when the OS thread that started the process ends, not
	// the test binary; tests that end a goroutine locked to its thread
	// (network namespace work) end threads. So the process is started from
	// a thread kept until Stop.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		started <- cmd.Start()
		<-s.stopped
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("apiservertest: starting %s: %w", bin, err)
	}
	s.procs = append(s.procs, cmd)
	return cmd, nil
}

func (s *Server) startEtcd(ctx context.Context, bin string) error {
	client, err := freePort()
	if err != nil {
		return err
	}
	peer, err := freePort()
	if err != nil {
		return err
	}
	cu := "http://127.0.0.1:" + strconv.Itoa(client)
	pu := "http://127.0.0.1:" + strconv.Itoa(peer)
	if _, err := s.start(bin, s.etcdLog,
		"--name", "test", "--data-dir", filepath.Join(s.dir, "etcd"),
		"--listen-client-urls", cu, "--advertise-client-urls", cu,
		"--listen-peer-urls", pu, "--initial-advertise-peer-urls", pu,
		"--initial-cluster", "test="+pu,
		"--log-level", "warn", "--logger", "zap"); err != nil {
		return err
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if s.exited(0) {
			return false, errors.New("etcd exited")
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cu+"/health", nil)
		resp, err := hc.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("apiservertest: etcd on %s not healthy: %w\n%s", cu, err, tail(s.etcdLog))
	}
	s.etcdURL = cu
	return nil
}

func (s *Server) startAPIServer(ctx context.Context, bin string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	p := func(name string) string { return filepath.Join(s.dir, name) }
	if _, err := s.start(bin, s.apiLog,
		"--etcd-servers", s.etcdURL,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(port),
		"--tls-cert-file", p("apiserver.crt"), "--tls-private-key-file", p("apiserver.key"),
		"--client-ca-file", p("ca.crt"),
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", p("sa.pub"), "--service-account-signing-key-file", p("sa.key"),
		"--service-cluster-ip-range", "10.0.0.0/24",
		"--authorization-mode", "RBAC",
		"--disable-admission-plugins", "ServiceAccount",
		"--endpoint-reconciler-type", "none",
		"--profiling=false", "--v=0"); err != nil {
		return err
	}
	s.host = "https://127.0.0.1:" + strconv.Itoa(port)
	cs, err := kubernetes.NewForConfig(s.Config())
	if err != nil {
		return fmt.Errorf("apiservertest: client: %w", err)
	}
	rc := cs.Discovery().RESTClient()
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if s.exited(1) {
			return false, errors.New("kube-apiserver exited")
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		res := rc.Get().AbsPath("/readyz").Do(rctx)
		var code int
		res.StatusCode(&code)
		return res.Error() == nil && code == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("apiservertest: kube-apiserver on %s not ready: %w\n%s", s.host, err, tail(s.apiLog))
	}
	return nil
}

// exited reports whether process i has exited (non-blocking).
func (s *Server) exited(i int) bool {
	if i >= len(s.procs) {
		return false
	}
	var ws syscall.WaitStatus
	pid, err := syscall.Wait4(s.procs[i].Process.Pid, &ws, syscall.WNOHANG, nil)
	return err == nil && pid == s.procs[i].Process.Pid
}

// installCRDs creates every CRD of dir and waits until each is Established
// and served (a list of its resource succeeds).
func (s *Server) installCRDs(ctx context.Context, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return fmt.Errorf("apiservertest: CRDs in %s: %w", dir, err)
	}
	c, err := apiextensions.NewForConfig(s.Config())
	if err != nil {
		return fmt.Errorf("apiservertest: apiextensions client: %w", err)
	}
	var names []string
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("apiservertest: %w", err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			return fmt.Errorf("apiservertest: CRD %s: %w", f, err)
		}
		if _, err := c.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("apiservertest: creating CRD %s: %w", crd.Name, err)
		}
		names = append(names, crd.Name)
	}
	for _, name := range names {
		err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			crd, err := c.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("apiservertest: CRD %s not established: %w", name, err)
		}
	}
	return nil
}

// tail returns the last lines of a log file for an error message.
func tail(file string) string {
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Sprintf("(no log %s: %v)", file, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return fmt.Sprintf("--- last lines of %s ---\n%s", filepath.Base(file), strings.Join(lines, "\n"))
}

// writePKI writes a CA, the API server's serving certificate (127.0.0.1,
// localhost), an admin client certificate (O=system:masters) and the
// ServiceAccount signing key pair.
func (s *Server) writePKI() error {
	ca, err := newTestCA(time.Now())
	if err != nil {
		return fmt.Errorf("apiservertest: CA: %w", err)
	}
	s.caPEM = ca.certPEM
	srvCert, srvKey, err := ca.leaf(2, pkix.Name{CommonName: "kube-apiserver"}, x509.ExtKeyUsageServerAuth,
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")}, []string{"localhost", "kubernetes.default.svc"})
	if err != nil {
		return fmt.Errorf("apiservertest: serving certificate: %w", err)
	}
	s.certPEM, s.keyPEM, err = ca.leaf(3, pkix.Name{CommonName: "multinet-test-admin", Organization: []string{"system:masters"}}, x509.ExtKeyUsageClientAuth, nil, nil)
	if err != nil {
		return fmt.Errorf("apiservertest: client certificate: %w", err)
	}
	saKey, saPub, err := serviceAccountKey()
	if err != nil {
		return fmt.Errorf("apiservertest: ServiceAccount key: %w", err)
	}
	files := map[string][]byte{
		"ca.crt":        s.caPEM,
		"apiserver.crt": srvCert,
		"apiserver.key": srvKey,
		"sa.key":        saKey,
		"sa.pub":        saPub,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(s.dir, name), data, 0o600); err != nil {
			return fmt.Errorf("apiservertest: %w", err)
		}
	}
	return nil
}

// testCA is the server's self-signed CA (P-256, valid from an hour before
// now for a day): its certificate, parsed and as PEM, and its key.
type testCA struct {
	cert    *x509.Certificate
	certPEM []byte
	key     *ecdsa.PrivateKey
	now     time.Time
}

// newTestCA makes the CA.
func newTestCA(now time.Time) (*testCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "multinet-apiservertest-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("certificate: %w", err)
	}
	return &testCA{cert: cert, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key, now: now}, nil
}

// leaf makes a certificate the CA signs, for usage, with the SANs ips and
// dns; returns it and its key as PEM.
func (ca *testCA) leaf(serial int64, subj pkix.Name, usage x509.ExtKeyUsage, ips []net.IP, dns []string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      subj,
		NotBefore:    ca.now.Add(-time.Hour),
		NotAfter:     ca.now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  ips,
		DNSNames:     dns,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

// serviceAccountKey makes the key pair that signs ServiceAccount tokens:
// the private key and the public key as PEM.
func serviceAccountKey() (keyPEM, pubPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), nil
}

// ---- one server per test binary ---------------------------------------------

var shared struct {
	mu    sync.Mutex
	srv   *Server
	err   error
	tried bool
}

// Main runs the tests of a package that uses Shared and stops the shared
// server (if one was started) afterwards. Use it as
//
//	func TestMain(m *testing.M) { os.Exit(apiservertest.Main(m)) }
func Main(m *testing.M) int {
	code := m.Run()
	StopShared()
	return code
}

// StopShared stops the shared server, if one was started: for a TestMain
// that runs its tests through another helper's Main (cnitest.Main), as
//
//	func TestMain(m *testing.M) { code := cnitest.Main(m); apiservertest.StopShared(); os.Exit(code) }
func StopShared() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv != nil {
		shared.srv.Stop()
		shared.srv = nil
	}
}

// Shared returns the package's server, starting it on first use (with the
// module's deploy/crds installed). When the binaries are missing it skips
// tb with the reason, or fails it when MULTINET_REQUIRE_APISERVER=1. A start
// that failed fails every caller with the same error.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.tried {
		shared.tried = true
		if _, _, err := Binaries(); err != nil {
			shared.err = &missingError{err}
		} else {
			shared.srv, shared.err = Start(context.Background(), Options{})
		}
	}
	var missing *missingError
	switch {
	case errors.As(shared.err, &missing) && os.Getenv(RequireEnv) != "1":
		testskip.Skip(tb, "needs a real API server: %v (set %s=1 to fail instead)", shared.err, RequireEnv)
	case shared.err != nil:
		tb.Fatalf("needs a real API server: %v", shared.err)
	}
	return shared.srv
}

type missingError struct{ err error }

func (e *missingError) Error() string { return e.err.Error() }
func (e *missingError) Unwrap() error { return e.err }

// ServiceAccountConfig creates or updates the ClusterRoles,
// ClusterRoleBindings, Roles and RoleBindings of rbacFile, a multi-document
// YAML file named from the module root (e.g.
// "deploy/base/multinetd-rbac.yaml"; Roles and RoleBindings without a
// namespace go into namespace, created when missing), waits until the API
// server's authorizer grants what they say (a SubjectAccessReview per rule
// allowed), and returns a configuration impersonating ServiceAccount
// namespace/name with the groups the API server gives it: a component
// tested with it has exactly the privileges the install gives it. Other
// kinds in the file are skipped. The objects are never deleted and
// re-created: another test of the package using the same file must never
// meet the role missing.
func (s *Server) ServiceAccountConfig(tb testing.TB, rbacFile, namespace, name string) *rest.Config {
	tb.Helper()
	root, err := moduleRoot()
	if err != nil {
		tb.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, rbacFile))
	if err != nil {
		tb.Fatal(err)
	}
	kc := kubernetes.NewForConfigOrDie(s.Config())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	user := "system:serviceaccount:" + namespace + ":" + name
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
	var checks []authorizationv1.ResourceAttributes
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var kind struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &kind); err != nil {
			tb.Fatalf("%s: %v", rbacFile, err)
		}
		if err := applyRBAC(ctx, tb, kc, kind.Kind, []byte(doc), namespace, &checks); err != nil {
			tb.Fatalf("%s: %s: %v", rbacFile, kind.Kind, err)
		}
	}
	for _, c := range checks {
		err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			r, err := kc.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
				Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: &c},
			}, metav1.CreateOptions{})
			return err == nil && r.Status.Allowed, nil
		})
		if err != nil {
			tb.Fatalf("%s: %s is not granted %+v by the API server: %v", rbacFile, user, c, err)
		}
	}
	return s.ConfigAs(user, groups...)
}

// applyRBAC creates the RBAC object doc of kind, or updates the one there,
// and adds to checks one access its rules grant (the first plain verb,
// resource and name of each rule), to wait for. Other kinds: nothing.
func applyRBAC(ctx context.Context, tb testing.TB, kc kubernetes.Interface, kind string, doc []byte, namespace string, checks *[]authorizationv1.ResourceAttributes) error {
	var rules []rbacv1.PolicyRule
	var err error
	switch kind {
	case "ClusterRole":
		var r rbacv1.ClusterRole
		if err = yaml.UnmarshalStrict(doc, &r); err == nil {
			rules = r.Rules
			err = createOrUpdate(ctx, kc.RbacV1().ClusterRoles(), &r, func(cur, want *rbacv1.ClusterRole) { cur.Rules = want.Rules })
		}
	case "ClusterRoleBinding":
		var b rbacv1.ClusterRoleBinding
		if err = yaml.UnmarshalStrict(doc, &b); err == nil {
			err = createOrUpdate(ctx, kc.RbacV1().ClusterRoleBindings(), &b, func(cur, want *rbacv1.ClusterRoleBinding) { cur.Subjects = want.Subjects })
		}
	case "Role":
		var r rbacv1.Role
		if err = yaml.UnmarshalStrict(doc, &r); err == nil {
			r.Namespace = ensureNamespace(ctx, tb, kc, r.Namespace, namespace)
			namespace, rules = r.Namespace, r.Rules
			err = createOrUpdate(ctx, kc.RbacV1().Roles(r.Namespace), &r, func(cur, want *rbacv1.Role) { cur.Rules = want.Rules })
		}
	case "RoleBinding":
		var b rbacv1.RoleBinding
		if err = yaml.UnmarshalStrict(doc, &b); err == nil {
			b.Namespace = ensureNamespace(ctx, tb, kc, b.Namespace, namespace)
			err = createOrUpdate(ctx, kc.RbacV1().RoleBindings(b.Namespace), &b, func(cur, want *rbacv1.RoleBinding) { cur.Subjects = want.Subjects })
		}
	}
	if kind != "Role" {
		namespace = ""
	}
	for _, rule := range rules {
		if c, ok := ruleCheck(rule, namespace); ok {
			*checks = append(*checks, c)
		}
	}
	return err
}

// ruleCheck is one access rule grants: its first plain verb (not a
// node-aware "associated-node:…" one, which needs a node), group and
// resource (a "pods/status" is resource and subresource), and name.
func ruleCheck(rule rbacv1.PolicyRule, namespace string) (authorizationv1.ResourceAttributes, bool) {
	if len(rule.APIGroups) == 0 || len(rule.Resources) == 0 {
		return authorizationv1.ResourceAttributes{}, false
	}
	for _, verb := range rule.Verbs {
		if strings.Contains(verb, ":") {
			continue
		}
		res, sub, _ := strings.Cut(rule.Resources[0], "/")
		c := authorizationv1.ResourceAttributes{Namespace: namespace, Verb: verb, Group: rule.APIGroups[0], Resource: res, Subresource: sub}
		if len(rule.ResourceNames) > 0 {
			c.Name = rule.ResourceNames[0]
		}
		return c, true
	}
	return authorizationv1.ResourceAttributes{}, false
}

// rbacClient is the part of a typed RBAC client createOrUpdate uses.
type rbacClient[T any] interface {
	Create(context.Context, T, metav1.CreateOptions) (T, error)
	Get(context.Context, string, metav1.GetOptions) (T, error)
	Update(context.Context, T, metav1.UpdateOptions) (T, error)
}

// createOrUpdate creates want, or, when it exists, sets what it grants
// (merge) on the stored object and updates it, retrying on a conflict.
func createOrUpdate[T interface {
	comparable
	metav1.Object
}](ctx context.Context, c rbacClient[T], want T, merge func(cur, want T)) error {
	if _, err := c.Create(ctx, want, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.Get(ctx, want.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		merge(cur, want)
		_, err = c.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

// ensureNamespace returns ns, or def when ns is empty, after creating that
// namespace if it does not exist.
func ensureNamespace(ctx context.Context, tb testing.TB, kc kubernetes.Interface, ns, def string) string {
	tb.Helper()
	if ns == "" {
		ns = def
	}
	_, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatalf("namespace %s: %v", ns, err)
	}
	return ns
}
