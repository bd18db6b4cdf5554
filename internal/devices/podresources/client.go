// Package podresources asks kubelet which devices a pod was allocated, through
// kubelet's PodResources API v1 (k8s.io/kubelet/pkg/apis/podresources/v1) on
// its unix socket (Kubernetes "Device Plugins" docs, "Monitoring device plugin resources"; device-info
// spec §4.1: "NPWG Implementations can retrieve them through the Pod Resources
// API").
//
// A Client dials lazily, bounds every call with a deadline, uses Get for one
// pod and falls back to List when kubelet does not serve Get, and dials a new
// connection when kubelet restarted (the socket is removed and created again).
package podresources

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

const (
	// DefaultSocket is kubelet's PodResources socket. A kubelet
	// started with another --root-dir serves it at
	// <root-dir>/pod-resources/kubelet.sock.
	DefaultSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"

	// DefaultTimeout bounds one DeviceIDs call when Options.Timeout is zero.
	DefaultTimeout = 10 * time.Second

	// DefaultMaxMsgSize is the largest response accepted when
	// Options.MaxMsgSize is zero, in bytes: a List on a node with many pods is
	// larger than gRPC's default 4 MiB; kubelet's own client allows 16 MiB.
	DefaultMaxMsgSize = 16 << 20
)

// ErrPodNotFound is wrapped by the error DeviceIDs returns when kubelet does
// not know the pod (yet). kubelet learns about a pod before it runs the pod's
// sandbox, so during a CNI ADD this is rare and short-lived: callers may retry
// briefly.
var ErrPodNotFound = errors.New("pod not known to kubelet")

// ErrClosed is returned by calls on a closed Client.
var ErrClosed = errors.New("podresources client closed")

// Options configure a Client. The zero value is usable.
type Options struct {
	// Timeout bounds each DeviceIDs call (dial, Get and the List fallback
	// together) unless the caller's context ends earlier; DefaultTimeout when
	// zero.
	Timeout time.Duration
	// MaxMsgSize is the largest response accepted, in bytes;
	// DefaultMaxMsgSize when zero.
	MaxMsgSize int
}

// Client is a PodResources v1 client of one kubelet socket. It is safe for
// concurrent use. Create it with New; Close it when done.
type Client struct {
	socket  string
	timeout time.Duration
	maxMsg  int

	mu     sync.Mutex
	cur    *conn // nil until the first call, and after a redial was asked for
	closed bool
}

// conn is one gRPC connection to one kubelet instance.
type conn struct {
	cc     *grpc.ClientConn
	lister podresourcesv1.PodResourcesListerClient
	// noGet is set once this kubelet answered Get with "not implemented" or
	// "disabled by feature gate"; later calls go straight to List.
	noGet atomic.Bool
}

// New returns a Client of the PodResources socket at socketPath (DefaultSocket
// when empty; a relative path is made absolute). It does not dial: the first
// call does, so New succeeds while kubelet is not up yet.
func New(socketPath string, opts Options) (*Client, error) {
	if socketPath == "" {
		socketPath = DefaultSocket
	}
	abs, err := filepath.Abs(socketPath)
	if err != nil {
		return nil, fmt.Errorf("podresources socket %q: %w", socketPath, err)
	}
	if opts.Timeout < 0 || opts.MaxMsgSize < 0 {
		return nil, fmt.Errorf("podresources socket %s: negative timeout or message size", abs)
	}
	c := &Client{socket: abs, timeout: opts.Timeout, maxMsg: opts.MaxMsgSize}
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	if c.maxMsg == 0 {
		c.maxMsg = DefaultMaxMsgSize
	}
	return c, nil
}

// Socket is the absolute path of the kubelet socket the Client talks to.
func (c *Client) Socket() string { return c.socket }

// Close closes the connection. Calls in flight fail; later calls return
// ErrClosed. Close is idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.cur == nil {
		return nil
	}
	err := c.cur.cc.Close()
	c.cur = nil
	if err != nil {
		return fmt.Errorf("podresources %s: close: %w", c.socket, err)
	}
	return nil
}

// DeviceIDs returns the device IDs kubelet allocated to the pod
// namespace/name, keyed by resource name (e.g. "example.com/netdev"). IDs are
// collected over all containers kubelet reports (app containers and
// restartable init containers), deduplicated, and sorted in natural order
// ("eth2" before "eth10"): kubelet reports them in Go map order, which changes
// from call to call, and the caller gives the i-th attachment of a resource
// the i-th ID. Resources without device IDs are left out; a pod without
// devices gives an empty map.
//
// It asks Get for the pod and falls back to List when kubelet does not serve
// Get (kubelet < 1.27, or feature gate KubeletPodResourcesGet off). When the
// connection is unavailable (kubelet restarted) it dials again once. The whole
// call ends within Options.Timeout or the caller's deadline, whichever comes
// first.
//
// Errors name the socket and the pod. A pod kubelet does not know gives an
// error wrapping ErrPodNotFound; an expired deadline an error wrapping
// context.DeadlineExceeded.
func (c *Client) DeviceIDs(ctx context.Context, namespace, name string) (map[string][]string, error) {
	if namespace == "" || name == "" {
		return nil, fmt.Errorf("podresources %s: pod %q/%q: namespace and name are required", c.socket, namespace, name)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	pod, err := c.podResources(ctx, namespace, name)
	if err != nil {
		return nil, c.wrap(ctx, namespace, name, err)
	}
	return DeviceIDsOf(pod), nil
}

// wrap names the socket and the pod, and makes context errors visible to
// errors.Is when gRPC reported them as status codes.
func (c *Client) wrap(ctx context.Context, namespace, name string, err error) error {
	if errors.Is(err, ErrPodNotFound) || errors.Is(err, ErrClosed) {
		return fmt.Errorf("podresources %s: pod %s/%s: %w", c.socket, namespace, name, err)
	}
	ctxErr := ctx.Err()
	switch status.Code(err) {
	case codes.DeadlineExceeded:
		// The server may time the call out a moment before our context does.
		ctxErr = context.DeadlineExceeded
	case codes.Canceled:
		if ctxErr == nil {
			ctxErr = context.Canceled
		}
	}
	if ctxErr != nil && !errors.Is(err, ctxErr) {
		return fmt.Errorf("podresources %s: pod %s/%s: %w: %w", c.socket, namespace, name, ctxErr, err)
	}
	return fmt.Errorf("podresources %s: pod %s/%s: %w", c.socket, namespace, name, err)
}

// podResources looks the pod up on the current connection and, when that
// connection is unavailable, once more on a new one.
func (c *Client) podResources(ctx context.Context, namespace, name string) (*podresourcesv1.PodResources, error) {
	for attempt := 0; ; attempt++ {
		cn, err := c.conn()
		if err != nil {
			return nil, err
		}
		pod, err := lookup(ctx, cn, namespace, name)
		if err == nil || attempt > 0 || status.Code(err) != codes.Unavailable || ctx.Err() != nil {
			return pod, err
		}
		// kubelet restarted or is restarting: a new connection starts without
		// the old one's reconnect backoff and without its noGet.
		c.drop(cn)
	}
}

// conn returns the current connection, creating it when there is none.
func (c *Client) conn() (*conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if c.cur != nil {
		return c.cur, nil
	}
	cc, err := grpc.NewClient("unix://"+c.socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(c.maxMsg)),
		// kubelet is local: reconnect quickly after it restarted instead of
		// backing off to gRPC's default of two minutes.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: time.Second,
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	c.cur = &conn{cc: cc, lister: podresourcesv1.NewPodResourcesListerClient(cc)}
	return c.cur, nil
}

// drop closes cn and forgets it if it is still the current connection.
func (c *Client) drop(cn *conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == cn {
		c.cur = nil
		_ = cn.cc.Close()
	}
}

// lookup asks Get, or List when this kubelet does not serve Get.
func lookup(ctx context.Context, cn *conn, namespace, name string) (*podresourcesv1.PodResources, error) {
	if !cn.noGet.Load() {
		resp, err := cn.lister.Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodNamespace: namespace, PodName: name})
		switch {
		case err == nil:
			if p := resp.GetPodResources(); p != nil {
				return p, nil
			}
			return nil, ErrPodNotFound
		case getUnsupported(err):
			cn.noGet.Store(true)
		case podNotFound(err):
			// Get and List read the same kubelet pod manager: List would not
			// find it either.
			return nil, ErrPodNotFound
		case transportError(err):
			return nil, fmt.Errorf("get: %w", err)
		}
		// Any other Get failure: List may still answer.
	}
	resp, err := cn.lister.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	for _, p := range resp.GetPodResources() {
		if p.GetNamespace() == namespace && p.GetName() == name {
			return p, nil
		}
	}
	return nil, ErrPodNotFound
}

// getUnsupported reports whether err says that kubelet does not serve Get:
// Unimplemented from a kubelet older than 1.27, or kubelet's "PodResources API
// Get method disabled" (code Unknown) when feature gate KubeletPodResourcesGet
// is off.
func getUnsupported(err error) bool {
	st := status.Convert(err)
	if st.Code() == codes.Unimplemented {
		return true
	}
	msg := strings.ToLower(st.Message())
	return strings.Contains(msg, "disabled") || strings.Contains(msg, "feature gate") ||
		strings.Contains(msg, "kubeletpodresourcesget")
}

// podNotFound reports whether Get said that kubelet does not know the pod:
// kubelet answers "pod <name> in namespace <ns> not found" with code Unknown.
func podNotFound(err error) bool {
	st := status.Convert(err)
	switch st.Code() {
	case codes.NotFound:
		return true
	case codes.Unknown:
		return strings.Contains(strings.ToLower(st.Message()), "not found")
	}
	return false
}

// transportError reports whether err is about the connection or the deadline
// rather than about Get itself; List would fail the same way.
func transportError(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return true
	}
	return false
}
