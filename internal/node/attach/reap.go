package attach

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"github.com/multinet/multinet/internal/node/kube"
	"github.com/multinet/multinet/internal/node/state"
)

// ReapResult is what one Reap did.
type ReapResult struct {
	// Reaped are the containers whose attachments were torn down and whose
	// record was removed.
	Reaped []string
	// Young are records of containers the runtime does not list that were
	// written less than minAge ago (an ADD whose sandbox the runtime has not
	// listed yet): left for a later Reap.
	Young int
	// Busy are records of containers with an operation in progress: left.
	Busy int
	// Failed are records whose teardown failed: kept for a later Reap.
	Failed int
}

// Reap tears down and removes the attachment records of containers the
// runtime no longer has, which CNI GC would do if the runtime called it
// (containerd 2.4 does not): the sandbox of a failed ADD whose one cleanup
// DEL never reached multinetd (it was down longer than the runtime waits),
// or of a pod removed while multinetd was down. live reports whether the
// runtime lists a container ID (every pod sandbox, in any state); Reap
// never calls it with a container the runtime might still be creating:
// records written less than minAge ago and containers with an operation in
// progress are left alone. Each teardown is a DEL without netns of every
// attachment of the record, in reverse order, as GC's (CNI spec 1.1 "GC");
// a corrupt record's readable part and libcni's cache are torn down.
//
// The delegates run with the CNI_PATH of the last request multinetd served
// (or Options.BinDirs); before any request nothing is reaped.
//
// Errors: the record directory cannot be listed, or a teardown failed (the
// record then stays, with what is left, for the next Reap; a Warning Event
// goes to the pod when it still exists).
func (e *Engine) Reap(ctx context.Context, live func(containerID string) bool, minAge time.Duration) (ReapResult, error) {
	var res ReapResult
	cniPath := e.requestPath()
	if cniPath == "" && len(e.opts.BinDirs) == 0 {
		return res, nil
	}
	ids, err := e.opts.Store.List()
	if err != nil {
		return res, fmt.Errorf("reap: %w", err)
	}
	var errs []error
	for _, id := range ids {
		if live(id) {
			continue
		}
		reaped, err := e.reapOne(ctx, cniPath, id, minAge, &res)
		if err != nil {
			errs = append(errs, err)
			res.Failed++
		}
		if reaped {
			res.Reaped = append(res.Reaped, id)
		}
	}
	return res, errors.Join(errs...)
}

// reapOne reclaims container id when no operation holds it and its record
// is at least minAge old.
func (e *Engine) reapOne(ctx context.Context, cniPath, id string, minAge time.Duration, res *ReapResult) (bool, error) {
	unlock, ok := e.locks.TryLock(id)
	if !ok {
		res.Busy++
		return false, nil
	}
	defer unlock()
	modified, err := e.opts.Store.Modified(id)
	if errors.Is(err, state.ErrNotFound) {
		return false, nil // removed by a DEL meanwhile
	}
	if err != nil {
		return false, fmt.Errorf("reap: %w", err)
	}
	if time.Since(modified) < minAge {
		res.Young++
		return false, nil
	}
	rec, loadErr := e.opts.Store.Load(id)
	if errors.Is(loadErr, state.ErrNotFound) {
		return false, nil
	}
	log := klog.FromContext(ctx).WithValues("containerID", id)
	if err := e.reclaim(ctx, "reap", cniPath, id, rec, loadErr); err != nil {
		if rec != nil {
			e.reapFailedEvent(ctx, rec, err)
		}
		return false, err
	}
	if rec != nil {
		log = log.WithValues("pod", rec.PodNamespace+"/"+rec.PodName, "attachments", len(rec.Attachments))
	}
	log.Info("reaped the attachments of a sandbox the runtime no longer has")
	return true, nil
}

// reapFailedEvent tells the pod of rec, when it still exists, that the
// attachments of one of its former sandboxes could not be torn down.
func (e *Engine) reapFailedEvent(ctx context.Context, rec *state.Record, err error) {
	if e.opts.Pods == nil || e.opts.Events == nil || rec.PodName == "" {
		return
	}
	pod, perr := e.opts.Pods.Get(ctx, rec.PodNamespace, rec.PodName, "")
	if perr != nil || pod == nil {
		return
	}
	e.warningEvent(pod, kube.ReasonStaleSandboxTeardownFailed, "sandbox %s is gone from the runtime, but its attachments could not be torn down (retried): %v", rec.ContainerID, err)
}

// requestPath is the CNI_PATH of the last request served ("" before any).
func (e *Engine) requestPath() string {
	e.cniMu.Lock()
	defer e.cniMu.Unlock()
	return e.lastPath
}
