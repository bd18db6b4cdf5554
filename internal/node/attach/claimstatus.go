package attach

import (
	"context"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"k8s.io/klog/v2"

	"github.com/multinet/multinet/internal/devices/draclaims"
	"github.com/multinet/multinet/internal/node/state"
)

// claimStatusTimeout bounds the writes of one ADD's or DEL's claim statuses.
const claimStatusTimeout = 10 * time.Second

// claimsReady writes, for each DRA attachment of an ADD that succeeded, the
// device's networkData and Ready/NetworkReady True into its ResourceClaim
// (KEP-4817). A write that fails is logged: the pod's networks are up.
func (e *Engine) claimsReady(ctx context.Context, p *plan, results []types.Result) {
	if e.opts.Claims == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimStatusTimeout)
	defer cancel()
	for i, d := range p.claimDevices {
		if d == nil {
			continue
		}
		a := &p.attachments[i]
		nd, err := draclaims.NetworkData(results[i], a.IfName)
		if err == nil {
			err = e.opts.Claims.SetReady(ctx, d, nd, "attached as "+a.IfName+" to network "+a.NetworkKey+" by multinetd")
		}
		if err != nil {
			klog.FromContext(ctx).Error(err, "Cannot write the DRA device's status", "device", d.String())
		}
	}
}

// claimsFailed writes Ready/NetworkReady False with the reason msg for each
// DRA attachment of an ADD that failed, so that the claim says why the pod
// does not start.
func (e *Engine) claimsFailed(p *plan, msg string) {
	if e.opts.Claims == nil || p == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), claimStatusTimeout)
	defer cancel()
	for _, d := range p.claimDevices {
		if d == nil {
			continue
		}
		if err := e.opts.Claims.SetFailed(ctx, d, msg); err != nil {
			klog.Background().Error(err, "Cannot write the DRA device's status", "device", d.String())
		}
	}
}

// clearClaim removes the status of the DRA device of torn-down attachment a
// from its ResourceClaim (nothing when a has none or the claim is gone).
func (e *Engine) clearClaim(ctx context.Context, a *state.Attachment) {
	if e.opts.Claims == nil || a.Claim == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimStatusTimeout)
	defer cancel()
	d := draclaims.FromState(a.Claim)
	if err := e.opts.Claims.Clear(ctx, d); err != nil {
		klog.FromContext(ctx).Error(err, "Cannot clear the DRA device's status", "device", d.String())
	}
}
