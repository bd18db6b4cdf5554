// Package netstatus publishes the network-status annotation of the pods
// multinetd attached (multi-net spec §5) and retries the writes that fail
// in the background. The CNI engine (internal/node/attach) hands it each sandbox's
// record once the record is saved (Publish) and withdraws it before tearing
// the attachments down (Withdraw); the publisher reads records from the
// store under the engine's per-container lock (Options.Locks), so it never
// publishes what a DEL has begun to tear down.
package netstatus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/multinet/multinet/internal/node/keyedmutex"
	"github.com/multinet/multinet/internal/node/kube"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/pkg/spec/status"
)

// How network-status reaches the pod (multi-net spec §5; docs/multinetd.md
// "network-status", docs/decisions/status.md "§5 — publishing"):
//
//  1. ADD saves its final record, with the annotation to publish in
//     Record.NetworkStatus (state pending), durably, and only then PATCHes
//     it. A save that fails fails the ADD, which tears the attachments down:
//     nothing that is rolled back was ever published.
//  2. When the PATCH lands the record is marked landed. When it fails the
//     ADD still succeeds (the pod's networks are up), a NetworkStatusFailed
//     Warning is posted and the container is handed to the retrier.
//  3. The retrier (Run, started by multinetd) PATCHes again,
//     with a per-container exponential backoff up to a cap, a bounded number
//     of workers, until the PATCH lands (NetworkStatusWritten Event), or the
//     status is withdrawn: the pod is gone (deleted, or re-created under its
//     name), DEL or GC removed or began tearing down the record, or a newer
//     sandbox of the same pod published its own. On start it resumes the
//     records whose status is still pending.
//
// Every attempt holds the container's lock (Options.Locks: the one ADD,
// DEL, CHECK and GC hold) and reads the record under it, so it never publishes what a DEL has
// begun to tear down; and it holds the pod's publish lock, so that an older
// sandbox's status never overwrites a newer one's.

// StatusWriter writes the network-status annotation (kube.StatusPatcher).
type StatusWriter interface {
	PatchAnnotation(ctx context.Context, namespace, name, uid, key, value string) error
}

// EventSink posts Events on pods (kube.Events).
type EventSink interface {
	Normal(obj runtime.Object, reason, format string, args ...any)
	Warning(obj runtime.Object, reason, format string, args ...any)
}

// Options configure a Publisher. Store, Writer and Locks are required.
type Options struct {
	// Store keeps the attachment records, with the status to publish.
	Store *state.Store
	// Writer PATCHes the annotation.
	Writer StatusWriter
	// Locks are the engine's per-container locks (attach.Options.Locks):
	// every background write holds its container's.
	Locks *keyedmutex.Map
	// Events posts NetworkStatusFailed and NetworkStatusWritten; may be nil.
	Events EventSink
	// Observer is told about pending and retried writes; may be nil.
	Observer Observer
	// Async writes network-status after ADD returns (retrying in the
	// background) instead of before. Default false: the annotation is on
	// the pod before the runtime reports the sandbox ready.
	Async bool
}

// Publisher publishes network-status. Create it with New; it is safe for
// concurrent use.
type Publisher struct {
	opts    Options
	retrier statusRetrier
	bg      sync.WaitGroup // Async first writes
}

// New returns a Publisher. Errors: a required option is missing.
func New(opts Options) (*Publisher, error) {
	if opts.Store == nil || opts.Writer == nil || opts.Locks == nil {
		return nil, errors.New("netstatus: Options.Store, Writer and Locks are required")
	}
	return &Publisher{opts: opts}, nil
}

// Wait blocks until the Async first writes are done or ctx ends.
func (p *Publisher) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { p.bg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *Publisher) normalEvent(pod *corev1.Pod, reason, format string, args ...any) {
	if p.opts.Events != nil && pod != nil {
		p.opts.Events.Normal(pod, reason, format, args...)
	}
}

func (p *Publisher) warningEvent(pod *corev1.Pod, reason, format string, args ...any) {
	if p.opts.Events != nil && pod != nil {
		p.opts.Events.Warning(pod, reason, format, args...)
	}
}

// Observer is told about network-status writes (multinetd's metrics).
type Observer interface {
	// StatusPending is called with the number of containers whose
	// network-status waits for a background retry, whenever it changes.
	StatusPending(n int)
	// StatusRetried is called after each background retry with its result:
	// RetryLanded, RetryFailed or RetryWithdrawn.
	StatusRetried(result string)
}

// Results of a background network-status retry (Observer).
const (
	RetryLanded    = "landed"
	RetryFailed    = "failed"
	RetryWithdrawn = "withdrawn"
)

// RetryOptions configure Run. Zero values take defaults.
type RetryOptions struct {
	// Workers is how many PATCHes run at once. Default 4.
	Workers int
	// BaseDelay is the wait before a container's first retry; it doubles
	// after every failed one. Default 1 s.
	BaseDelay time.Duration
	// MaxDelay caps the wait between two retries of a container. Default 1 min.
	MaxDelay time.Duration
	// AttemptTimeout bounds one retry (the PATCH with its own short retries).
	// Default 10 s.
	AttemptTimeout time.Duration
}

func (o *RetryOptions) defaults() {
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.BaseDelay <= 0 {
		o.BaseDelay = time.Second
	}
	if o.MaxDelay <= 0 {
		o.MaxDelay = time.Minute
	}
	if o.MaxDelay < o.BaseDelay {
		o.MaxDelay = o.BaseDelay
	}
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = statusTimeout
	}
}

// statusTimeout bounds the network-status PATCH of an ADD.
const statusTimeout = 10 * time.Second

// statusLockWait bounds how long a background attempt waits for the
// container's lock (an ADD or DEL of it is running); it is tried again later.
const statusLockWait = 2 * time.Second

// statusRetrier is the publisher's set of containers whose network-status has
// not landed. Its zero value is ready; the queue exists while
// Run runs.
type statusRetrier struct {
	mu      sync.Mutex
	pending map[string]*statusEntry // by container ID
	queue   workqueue.TypedRateLimitingInterface[string]
	// pods serializes the PATCHes of one pod (namespace/name).
	pods keyedmutex.Map
}

// statusEntry is one container waiting for a retry.
type statusEntry struct {
	namespace, name, uid string // the pod object (uid: NetworkStatus.PodUID)
	retries              int
	// withdraw, when set, says why the status must not be published any
	// more; the next attempt marks the record so.
	withdraw string
}

func podKey(namespace, name string) string { return namespace + "/" + name }

// Publish writes rec's pending network-status after ADD (or hot-plug) saved
// rec (the caller holds the container's lock): now, or with Options.Async in
// the background once ADD returned. A newer status of the pod withdraws the
// pending one of another sandbox first.
func (p *Publisher) Publish(ctx context.Context, pod *corev1.Pod, rec *state.Record) {
	p.supersedeStatus(rec)
	if p.opts.Async {
		id := rec.ContainerID
		p.bg.Add(1)
		go func() {
			defer p.bg.Done()
			p.firstStatusAttempt(context.WithoutCancel(ctx), id, pod)
		}()
		return
	}
	res, err := p.patchStatus(ctx, rec, statusTimeout)
	p.settleStatus(ctx, rec, pod, res, err, true)
}

// firstStatusAttempt is the AsyncStatus write of container id's status: as
// a retry, under the container's lock once ADD released it, but failing
// like the ADD's own write (Event, then the retrier).
func (p *Publisher) firstStatusAttempt(ctx context.Context, id string, pod *corev1.Pod) {
	lctx, cancel := context.WithTimeout(ctx, statusTimeout)
	unlock, err := p.opts.Locks.Lock(lctx, id)
	cancel()
	if err != nil {
		p.enqueueStatus(id, pod.Namespace, pod.Name, string(pod.UID))
		return
	}
	defer unlock()
	rec, err := p.opts.Store.Load(id)
	if err != nil || !rec.Pending() {
		return // DEL removed it, or a later ADD of the container replaced it
	}
	res, err := p.patchStatus(ctx, rec, statusTimeout)
	p.settleStatus(ctx, rec, pod, res, err, true)
}

// patchResult is how one network-status write ended.
type patchResult int

const (
	patchLanded patchResult = iota
	patchFailed
	patchWithdrawn
)

// patchStatus PATCHes rec's pending network-status, under the pod's publish
// lock, unless it was withdrawn meanwhile. The caller holds the container's
// lock. Errors: the PATCH's (patchFailed), or why it was withdrawn.
func (p *Publisher) patchStatus(ctx context.Context, rec *state.Record, timeout time.Duration) (patchResult, error) {
	ns := rec.NetworkStatus
	unlock, err := p.retrier.pods.Lock(ctx, podKey(rec.PodNamespace, rec.PodName))
	if err != nil {
		return patchFailed, err
	}
	defer unlock()
	if why := p.retrier.withdrawReason(rec.ContainerID); why != "" {
		return patchWithdrawn, errors.New(why)
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err = p.opts.Writer.PatchAnnotation(pctx, rec.PodNamespace, rec.PodName, ns.PodUID, status.Annotation, ns.Value)
	switch {
	case err == nil:
		return patchLanded, nil
	case errors.Is(err, kube.ErrPodGone):
		return patchWithdrawn, err
	}
	return patchFailed, err
}

// settleStatus records how a write of rec's status ended (the caller holds
// the container's lock): landed or withdrawn are saved in the record (not
// durably: a lost mark only repeats the same PATCH after a power loss) and
// end the container's retries; a failure of the ADD's own write (first)
// posts NetworkStatusFailed and hands the container to the retrier.
func (p *Publisher) settleStatus(ctx context.Context, rec *state.Record, pod *corev1.Pod, res patchResult, err error, first bool) {
	log := klog.FromContext(ctx).WithValues("containerID", rec.ContainerID, "pod", podKey(rec.PodNamespace, rec.PodName))
	switch res {
	case patchFailed:
		if !first {
			return
		}
		log.Error(err, "write network-status; retrying in the background")
		p.warningEvent(pod, kube.ReasonNetworkStatusFailed, "write %s: %v (multinetd keeps retrying)", status.Annotation, err)
		p.enqueueStatus(rec.ContainerID, rec.PodNamespace, rec.PodName, rec.NetworkStatus.PodUID)
		return
	case patchLanded:
		rec.NetworkStatus.State = state.StatusLanded
	case patchWithdrawn:
		log.V(1).Info("network-status not written: withdrawn", "reason", err)
		rec.NetworkStatus.State = state.StatusWithdrawn
	}
	if serr := p.opts.Store.SaveBuffered(rec); serr != nil {
		log.Error(serr, "mark the network-status of the record", "state", rec.NetworkStatus.State)
	}
	p.retrier.drop(rec.ContainerID, p.opts.Observer)
}

// Withdraw marks rec's pending network-status withdrawn (DEL and GC
// call it before they tear rec's attachments down, holding the container's
// lock; rec may be nil) and ends the container's retries, so that an
// annotation never lists attachments being torn down.
func (p *Publisher) Withdraw(containerID string, rec *state.Record) {
	if rec.Pending() {
		rec.NetworkStatus.State = state.StatusWithdrawn
	}
	p.retrier.drop(containerID, p.opts.Observer)
}

// supersedeStatus withdraws the pending status of every other container of
// rec's pod: rec's is newer (a new sandbox of the pod).
func (p *Publisher) supersedeStatus(rec *state.Record) {
	r := &p.retrier
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, ent := range r.pending {
		if id != rec.ContainerID && ent.namespace == rec.PodNamespace && ent.name == rec.PodName && ent.withdraw == "" {
			ent.withdraw = "superseded by the network-status of container " + rec.ContainerID
			if r.queue != nil {
				r.queue.Add(id)
			}
		}
	}
}

// PodGone withdraws the pending network-status of pod
// namespace/name with UID uid: the pod informer saw it deleted. Safe to call
// from an informer's handler (it does not block).
func (p *Publisher) PodGone(namespace, name, uid string) {
	r := &p.retrier
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, ent := range r.pending {
		if ent.namespace == namespace && ent.name == name && (ent.uid == "" || uid == "" || ent.uid == uid) && ent.withdraw == "" {
			ent.withdraw = "pod deleted"
			if r.queue != nil {
				r.queue.Add(id)
			}
		}
	}
}

// Pending returns the number of containers whose network-status
// waits for a background retry.
func (p *Publisher) Pending() int {
	p.retrier.mu.Lock()
	defer p.retrier.mu.Unlock()
	return len(p.retrier.pending)
}

// enqueueStatus hands container id to the retrier (its first retry after
// the base delay). Before Run runs it is only remembered.
func (p *Publisher) enqueueStatus(id, namespace, name, uid string) {
	r := &p.retrier
	r.mu.Lock()
	if r.pending == nil {
		r.pending = map[string]*statusEntry{}
	}
	if _, ok := r.pending[id]; !ok {
		r.pending[id] = &statusEntry{namespace: namespace, name: name, uid: uid}
	}
	if r.queue != nil {
		r.queue.AddRateLimited(id)
	}
	n := len(r.pending)
	r.mu.Unlock()
	if o := p.opts.Observer; o != nil {
		o.StatusPending(n)
	}
}

// withdrawReason is why container id's status was withdrawn, "" if it was not.
func (r *statusRetrier) withdrawReason(id string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ent, ok := r.pending[id]; ok {
		return ent.withdraw
	}
	return ""
}

// drop ends the retries of container id.
func (r *statusRetrier) drop(id string, o Observer) {
	r.mu.Lock()
	_, had := r.pending[id]
	delete(r.pending, id)
	n := len(r.pending)
	r.mu.Unlock()
	if had && o != nil {
		o.StatusPending(n)
	}
}

// Run retries the network-status writes that failed, until ctx
// ends: first those of the records whose status is still pending (written
// before a restart of multinetd, or by ADDs that ran before it was called),
// then every container an ADD hands over. It returns once its workers have
// stopped (an attempt in progress is cancelled with ctx). Errors: it is
// already running, or the records cannot be listed (it still retries what
// ADDs hand over until ctx ends).
func (p *Publisher) Run(ctx context.Context, opts RetryOptions) error {
	opts.defaults()
	if p.opts.Writer == nil {
		<-ctx.Done()
		return nil
	}
	r := &p.retrier
	q := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](opts.BaseDelay, opts.MaxDelay),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "multinet-network-status"})
	r.mu.Lock()
	if r.queue != nil {
		r.mu.Unlock()
		q.ShutDown()
		return errors.New("network-status retries already running")
	}
	r.queue = q
	for id := range r.pending {
		q.AddRateLimited(id)
	}
	r.mu.Unlock()
	resumeErr := p.resumeStatus(ctx)

	var wg sync.WaitGroup
	for range opts.Workers {
		wg.Go(func() {
			for {
				id, shutdown := q.Get()
				if shutdown {
					return
				}
				if p.retryStatus(ctx, id, opts.AttemptTimeout) && ctx.Err() == nil {
					q.AddRateLimited(id)
				} else {
					q.Forget(id)
				}
				q.Done(id)
			}
		})
	}
	<-ctx.Done()
	q.ShutDown()
	wg.Wait()
	r.mu.Lock()
	r.queue = nil
	r.mu.Unlock()
	return resumeErr
}

// resumeStatus hands every record with a pending network-status to the
// retrier, at once; of several records of one pod only the newest one's
// (the pod's current sandbox) is published, the older ones are withdrawn.
func (p *Publisher) resumeStatus(ctx context.Context) error {
	ids, err := p.opts.Store.List()
	if err != nil {
		return fmt.Errorf("network-status retries: %w", err)
	}
	type found struct {
		id  string
		rec *state.Record
	}
	newest := map[string]found{} // by pod, among records with a status
	var pending []found
	for _, id := range ids {
		rec, err := p.opts.Store.Load(id)
		if err != nil || rec.NetworkStatus == nil {
			continue // a record DEL just removed, or a corrupt one (DEL reports it)
		}
		k := podKey(rec.PodNamespace, rec.PodName)
		if n, ok := newest[k]; !ok || rec.Updated.After(n.rec.Updated) {
			newest[k] = found{id, rec}
		}
		if rec.Pending() {
			pending = append(pending, found{id, rec})
		}
	}
	r := &p.retrier
	r.mu.Lock()
	if r.pending == nil {
		r.pending = map[string]*statusEntry{}
	}
	for _, f := range pending {
		ent, ok := r.pending[f.id]
		if !ok {
			ent = &statusEntry{namespace: f.rec.PodNamespace, name: f.rec.PodName, uid: f.rec.NetworkStatus.PodUID}
			r.pending[f.id] = ent
		}
		if n := newest[podKey(f.rec.PodNamespace, f.rec.PodName)]; n.id != f.id && ent.withdraw == "" {
			ent.withdraw = "superseded by the network-status of container " + n.id
		}
		if r.queue != nil {
			r.queue.Add(f.id)
		}
	}
	n := len(r.pending)
	r.mu.Unlock()
	if len(pending) > 0 {
		klog.FromContext(ctx).Info("resuming network-status writes that had not landed", "containers", len(pending))
	}
	if o := p.opts.Observer; o != nil {
		o.StatusPending(n)
	}
	return nil
}

// retryStatus is one background attempt at container id's network-status.
// It returns true when the container is to be tried again later.
func (p *Publisher) retryStatus(ctx context.Context, id string, timeout time.Duration) bool {
	r := &p.retrier
	r.mu.Lock()
	ent, ok := r.pending[id]
	var pod *corev1.Pod
	if ok {
		ent.retries++
		pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ent.namespace, Name: ent.name, UID: types.UID(ent.uid)}}
	}
	r.mu.Unlock()
	if !ok {
		return false // landed, withdrawn or dropped meanwhile
	}
	log := klog.FromContext(ctx).WithValues("containerID", id, "pod", podKey(pod.Namespace, pod.Name))

	lctx, cancel := context.WithTimeout(ctx, statusLockWait)
	unlock, err := p.opts.Locks.Lock(lctx, id)
	cancel()
	if err != nil {
		return true // an ADD or DEL of the container is running: later
	}
	defer unlock()
	rec, err := p.opts.Store.Load(id)
	switch {
	case errors.Is(err, state.ErrNotFound):
		r.drop(id, p.opts.Observer) // DEL removed it
		return false
	case err != nil && errors.Is(err, state.ErrCorrupt):
		log.Error(err, "network-status retries end: the record is corrupt")
		r.drop(id, p.opts.Observer)
		return false
	case err != nil:
		log.Error(err, "network-status retry: read the record")
		return true
	case !rec.Pending():
		r.drop(id, p.opts.Observer)
		return false
	}

	res, err := p.patchStatus(ctx, rec, timeout)
	if ctx.Err() != nil {
		return false // stopping; the record stays pending for the next start
	}
	o := p.opts.Observer
	switch res {
	case patchLanded:
		log.Info("network-status written by a background retry", "retries", ent.retries)
		p.normalEvent(pod, kube.ReasonNetworkStatusWritten, "wrote %s after %d background retries", status.Annotation, ent.retries)
		if o != nil {
			o.StatusRetried(RetryLanded)
		}
	case patchWithdrawn:
		if o != nil {
			o.StatusRetried(RetryWithdrawn)
		}
	case patchFailed:
		log.Error(err, "network-status retry failed", "retries", ent.retries)
		if o != nil {
			o.StatusRetried(RetryFailed)
		}
		return true
	}
	p.settleStatus(ctx, rec, pod, res, err, false)
	return false
}
