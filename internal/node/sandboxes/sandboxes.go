// Package sandboxes lists the pod sandboxes a container runtime holds,
// through the CRI RuntimeService (k8s.io/cri-api, ListPodSandbox), so that
// multinetd can tell which attachment records belong to sandboxes the
// runtime has removed without a DEL reaching multinetd (CNI spec 1.1 "GC":
// the runtime would pass them as cni.dev/valid-attachments, but containerd
// 2.4 never calls GC).
package sandboxes

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Pod names a pod by namespace and name.
type Pod struct{ Namespace, Name string }

// The labels the kubelet puts on every pod sandbox it creates.
const (
	labelPodNamespace = "io.kubernetes.pod.namespace"
	labelPodName      = "io.kubernetes.pod.name"
)

// Lister lists the sandboxes of one CRI runtime. Create it with New; Close
// it when done. Safe for concurrent use.
type Lister struct {
	endpoint string
	conn     *grpc.ClientConn
	client   runtimeapi.RuntimeServiceClient
	self     *Pod
}

// New connects (lazily) to the CRI runtime at endpoint, a
// "unix:///path/to/socket" URL or a socket path, in the caller's view of
// the file system. self, when not nil, is the pod multinetd runs in: List
// then fails unless the runtime lists a sandbox of it, which proves that the
// endpoint is the runtime of this node's pods (a runtime that is not, such
// as Docker's containerd without the CRI plugin, would otherwise make every
// record look stale). Errors: an empty or malformed endpoint.
func New(endpoint string, self *Pod) (*Lister, error) {
	target, err := DialTarget(endpoint)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)))
	if err != nil {
		return nil, fmt.Errorf("CRI runtime endpoint %s: %w", endpoint, err)
	}
	return &Lister{endpoint: endpoint, conn: conn, client: runtimeapi.NewRuntimeServiceClient(conn), self: self}, nil
}

// DialTarget turns a CRI endpoint ("unix:///path" or an absolute socket
// path) into a gRPC target. Errors: an empty or malformed endpoint.
func DialTarget(endpoint string) (string, error) {
	switch {
	case endpoint == "":
		return "", errors.New("CRI runtime endpoint: empty")
	case strings.HasPrefix(endpoint, "unix://"):
		if strings.TrimPrefix(endpoint, "unix://") == "" {
			return "", fmt.Errorf("CRI runtime endpoint %q: no socket path", endpoint)
		}
		return endpoint, nil
	case strings.HasPrefix(endpoint, "/"):
		return "unix://" + endpoint, nil
	default:
		return "", fmt.Errorf("CRI runtime endpoint %q: want unix:///path or an absolute socket path", endpoint)
	}
}

// IDs returns the IDs of every pod sandbox the runtime holds, ready or not
// (a sandbox that is not ready still gets its DEL from the kubelet). Give ctx
// a deadline. Errors: the runtime cannot be reached or answers an error, or
// (with self) it does not list multinetd's own pod.
func (l *Lister) IDs(ctx context.Context) (map[string]bool, error) {
	resp, err := l.client.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return nil, fmt.Errorf("CRI ListPodSandbox at %s: %w", l.endpoint, err)
	}
	ids := make(map[string]bool, len(resp.Items))
	found := l.self == nil
	for _, sb := range resp.Items {
		ids[sb.Id] = true
		if !found && sb.Metadata != nil {
			found = sb.Metadata.Namespace == l.self.Namespace && sb.Metadata.Name == l.self.Name
		}
		if !found {
			found = sb.Labels[labelPodNamespace] == l.self.Namespace && sb.Labels[labelPodName] == l.self.Name
		}
	}
	if !found {
		return nil, fmt.Errorf("CRI runtime at %s lists %d sandboxes, none of multinetd's own pod %s/%s: not the runtime of this node's pods", l.endpoint, len(ids), l.self.Namespace, l.self.Name)
	}
	return ids, nil
}

// Close closes the connection.
func (l *Lister) Close() error { return l.conn.Close() }
