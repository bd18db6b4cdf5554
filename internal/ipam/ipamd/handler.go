// Package ipamd is the multinetd side of multinet-ipam: the CNI IPAM
// plugin (cmd/multinet-ipam), which the node's delegates run, forwards
// each ADD, DEL, CHECK, GC and STATUS over a unix socket of its own
// (internal/node/cniserver's protocol, internal/node/cniserver/api) to multinetd, which
// allocates through internal/ipam with its own ServiceAccount: the plugin needs
// no credentials on the node (docs/decisions/ipam.md). Serve runs the
// socket, the IPAllocation and IPAMClaim informers, the release of a
// deleted claim's addresses and the periodic Reconcile.
package ipamd

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	corev1 "k8s.io/api/core/v1"

	"github.com/multinet/multinet/internal/ipam"
	"github.com/multinet/multinet/internal/node/cniserver/api"
)

// Pods confirms that a pod named in CNI_ARGS is a pod of this node (the
// node-local pod cache of multinetd: kube.PodCache).
type Pods interface {
	Get(ctx context.Context, namespace, name, uid string) (*corev1.Pod, error)
}

// Handler serves multinet-ipam's CNI operations (a cniserver.Handler).
type Handler struct {
	Allocator *ipam.Allocator
	// Pods, when set, must know the pod of every request naming one, and
	// the pod must be bound to Allocator.Node: a node allocates for its
	// own pods only.
	Pods Pods
	// Ready, when set, gates STATUS (and so the runtime's view of the
	// plugin): nil when allocations can be served.
	Ready func() error
	// GCMinAge spares allocations younger than this from CNI GC (an ADD in
	// flight is not in the runtime's list yet). Default DefaultGCMinAge.
	GCMinAge time.Duration
}

// DefaultGCMinAge is Handler.GCMinAge's default.
const DefaultGCMinAge = time.Minute

// CNI_ARGS keys (CNI CONVENTIONS).
const (
	argPodNamespace = "K8S_POD_NAMESPACE"
	argPodName      = "K8S_POD_NAME"
	argPodUID       = "K8S_POD_UID"
)

// networkNamespace is the namespace whose pool rules apply to the request
// (internal/ipam Tenancy): CNI_ARGS api.ArgNetworkNamespace when present (set by multinetd,
// possibly empty), else the pod's namespace (another meta-plugin, such as
// Multus, does not say which NAD it runs), else "" (no pod: not
// Kubernetes).
func networkNamespace(args string, pod *ipam.PodRef) string {
	ns, set := "", false
	for _, kv := range strings.Split(args, ";") {
		if k, v, _ := strings.Cut(kv, "="); k == api.ArgNetworkNamespace {
			ns, set = v, true // the last: multinetd's own comes after the runtime's
		}
	}
	switch {
	case set:
		return ns
	case pod != nil:
		return pod.Namespace
	}
	return ""
}

// podRef reads the pod from CNI_ARGS ("K1=V1;K2=V2"); nil without one.
func podRef(args string) *ipam.PodRef {
	var p ipam.PodRef
	for _, kv := range strings.Split(args, ";") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case argPodNamespace:
			p.Namespace = v
		case argPodName:
			p.Name = v
		case argPodUID:
			p.UID = v
		}
	}
	if p.Namespace == "" || p.Name == "" {
		return nil
	}
	return &p
}

// parse decodes the request's network configuration; errors are CNI code 7.
func parse(req *api.Request) (*ipam.NetConf, *ipam.Config, error) {
	nc, err := ipam.ParseNetConf(req.Config)
	if err != nil {
		return nil, nil, types.NewError(types.ErrInvalidNetworkConfig, err.Error(), "")
	}
	cfg, err := nc.Config()
	if err != nil {
		return nil, nil, types.NewError(types.ErrInvalidNetworkConfig, err.Error(), "")
	}
	return nc, cfg, nil
}

// Add allocates (internal/ipam Allocate) and returns the IPAM result in the
// configuration's cniVersion: one IP per range set, with its gateway, and
// the configuration's routes and dns.
func (h *Handler) Add(ctx context.Context, req *api.Request) ([]byte, error) {
	nc, cfg, err := parse(req)
	if err != nil {
		return nil, err
	}
	ips, err := nc.RequestedIPs()
	if err != nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, err.Error(), "")
	}
	pod := podRef(req.Args)
	r := ipam.Request{
		Attachment:       ipam.Attachment{ContainerID: req.ContainerID, IfName: req.IfName, Pod: pod},
		IPs:              ips,
		Claim:            nc.ClaimReference(),
		NetworkNamespace: networkNamespace(req.Args, pod),
	}
	if err := h.checkPod(ctx, r.Pod); err != nil {
		return nil, err
	}
	al, err := h.Allocator.Allocate(ctx, cfg, r)
	if err != nil {
		return nil, cniError(err)
	}
	res := &current.Result{CNIVersion: current.ImplementedSpecVersion, Routes: cfg.Routes, DNS: cfg.DNS}
	for _, a := range al.Addresses {
		ipc := &current.IPConfig{Address: net.IPNet{IP: a.Prefix.Addr().AsSlice(), Mask: net.CIDRMask(a.Prefix.Bits(), a.Prefix.Addr().BitLen())}}
		if a.Gateway.IsValid() {
			ipc.Gateway = a.Gateway.AsSlice()
		}
		res.IPs = append(res.IPs, ipc)
	}
	out, err := res.GetAsVersion(nc.CNIVersion)
	if err != nil {
		_, _ = h.Allocator.Release(context.WithoutCancel(ctx), req.ContainerID, req.IfName)
		return nil, types.NewError(types.ErrIncompatibleCNIVersion, fmt.Sprintf("multinet-ipam: result in cniVersion %q: %v", nc.CNIVersion, err), "")
	}
	return json.Marshal(out)
}

// checkPod refuses a pod that is not this node's (when Pods is set).
func (h *Handler) checkPod(ctx context.Context, p *ipam.PodRef) error {
	if h.Pods == nil || p == nil {
		return nil
	}
	pod, err := h.Pods.Get(ctx, p.Namespace, p.Name, p.UID)
	if err != nil {
		return types.NewError(types.ErrTryAgainLater, fmt.Sprintf("multinet-ipam: pod %s/%s: %v", p.Namespace, p.Name, err), "")
	}
	if pod.Spec.NodeName != h.Allocator.Node {
		return types.NewError(types.ErrInvalidEnvironmentVariables,
			fmt.Sprintf("multinet-ipam: pod %s/%s is bound to node %q, not to this node %q", p.Namespace, p.Name, pod.Spec.NodeName, h.Allocator.Node), "")
	}
	return nil
}

// Del releases the attachment's addresses (not an IPAMClaim's). A
// configuration that cannot be parsed does not stop it: the attachment is
// known from CNI_CONTAINERID and CNI_IFNAME.
func (h *Handler) Del(ctx context.Context, req *api.Request) error {
	if _, err := h.Allocator.Release(ctx, req.ContainerID, req.IfName); err != nil {
		return types.NewError(types.ErrTryAgainLater, err.Error(), "")
	}
	return nil
}

// Check verifies that the attachment (or its IPAMClaim) still holds an
// address of each range set.
func (h *Handler) Check(ctx context.Context, req *api.Request) error {
	nc, cfg, err := parse(req)
	if err != nil {
		return err
	}
	pod := podRef(req.Args)
	r := ipam.Request{Attachment: ipam.Attachment{ContainerID: req.ContainerID, IfName: req.IfName, Pod: pod}, Claim: nc.ClaimReference(), NetworkNamespace: networkNamespace(req.Args, pod)}
	if err := h.Allocator.Check(ctx, cfg, r); err != nil {
		return cniError(err)
	}
	return nil
}

// gcConfig is the GC request's cni.dev/valid-attachments (CNI 1.1 "GC").
type gcConfig struct {
	Valid []ipam.GCAttachment `json:"cni.dev/valid-attachments"`
}

// GC releases this node's attachment-owned addresses of the network that
// the runtime's cni.dev/valid-attachments does not list.
func (h *Handler) GC(ctx context.Context, req *api.Request) error {
	_, cfg, err := parse(req)
	if err != nil {
		return err
	}
	var gc gcConfig
	if err := json.Unmarshal(req.Config, &gc); err != nil {
		return types.NewError(types.ErrDecodingFailure, fmt.Sprintf("multinet-ipam: cni.dev/valid-attachments: %v", err), "")
	}
	if _, err := h.Allocator.GC(ctx, cfg, gc.Valid, cmp.Or(h.GCMinAge, DefaultGCMinAge)); err != nil {
		return types.NewError(types.ErrTryAgainLater, err.Error(), "")
	}
	return nil
}

// Status is nil when allocations can be served (CNI STATUS).
func (h *Handler) Status(ctx context.Context, req *api.Request) error {
	if h.Ready != nil {
		if err := h.Ready(); err != nil {
			return types.NewError(50, "multinet-ipam: "+err.Error(), "")
		}
	}
	return nil
}

// cniError maps allocator errors to CNI errors: a requested or claimed
// address that cannot be used is invalid configuration (7, the pod's
// request must change); exhaustion and conflicts are try again later (11,
// addresses may be released); anything else is 999 with the message.
func cniError(err error) error {
	var cerr *types.Error
	var conf *ipam.ConfigError
	switch {
	case errors.As(err, &cerr):
		return cerr
	case errors.As(err, &conf):
		return types.NewError(types.ErrInvalidNetworkConfig, err.Error(), "")
	case errors.Is(err, ipam.ErrOutOfRange), errors.Is(err, ipam.ErrClaim) && !errors.Is(err, ipam.ErrTaken), errors.Is(err, ipam.ErrPoolNotAllowed):
		return types.NewError(types.ErrInvalidNetworkConfig, err.Error(), "")
	case errors.Is(err, ipam.ErrExhausted), errors.Is(err, ipam.ErrConflicts), errors.Is(err, ipam.ErrTaken), errors.Is(err, ipam.ErrQuota):
		return types.NewError(types.ErrTryAgainLater, err.Error(), "")
	}
	return types.NewError(types.ErrInternal, err.Error(), "")
}
