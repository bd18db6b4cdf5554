package attach

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/pkg/spec/status"
)

// statusIntent returns what rec publishes for the plan's pod: the encoded
// list, pending. nil when there is no pod or no StatusPublisher, or when the
// list cannot be encoded (logged; the ADD still succeeds).
func (e *Engine) statusIntent(log klog.Logger, p *plan, list []status.NetworkStatus) *state.NetworkStatus {
	if p.pod == nil || e.opts.Status == nil {
		return nil
	}
	value, err := status.Encode(list)
	if err != nil {
		log.Error(err, "encode network-status")
		return nil
	}
	return &state.NetworkStatus{Value: value, PodUID: string(p.pod.UID), State: state.StatusPending}
}

// publishStatus hands rec's pending network-status to the publisher (the
// caller holds the container's lock).
func (e *Engine) publishStatus(ctx context.Context, pod *corev1.Pod, rec *state.Record) {
	if e.opts.Status != nil {
		e.opts.Status.Publish(ctx, pod, rec)
	}
}

// withdrawStatus withdraws rec's pending network-status before its
// attachments are torn down (the caller holds the container's lock).
func (e *Engine) withdrawStatus(containerID string, rec *state.Record) {
	if e.opts.Status != nil {
		e.opts.Status.Withdraw(containerID, rec)
	}
}
