// Package policysync enforces MultiNetworkPolicy in multinetd: it keeps
// the pod sandboxes of its node (their attachment records), watches the
// policies, the namespaces' labels, the NetworkAttachmentDefinitions and
// every pod of the cluster (peers: labels, network-status, named ports),
// computes each local sandbox's effective rules with pkg/spec/policy and
// writes them into the sandbox's network namespace with
// internal/node/nftpolicy.
//
// The engine calls Enforce during ADD (after the delegates, before ADD
// answers: a pod selected at creation never runs without its rules) and
// Release on DEL and GC, holding the container's lock; everything else
// (policy, namespace, peer, NAD changes, hot-plugs, multinetd's start)
// goes through a queue of container IDs whose worker takes that lock.
// What cannot be enforced (an attachment without a kernel interface, a
// policy naming a network that does not exist, an invalid selector) is
// posted as Warning Events on the pod and the policy (docs/network-policy.md).
package policysync

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/multinet/multinet/internal/node/keyedmutex"
	"github.com/multinet/multinet/internal/node/nftpolicy"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/pkg/spec/policy"
)

// Sync results (Observer.PolicySynced).
const (
	ResultApplied   = "applied"   // the table was written
	ResultUnchanged = "unchanged" // the table already held these rules
	ResultRemoved   = "removed"   // no policy selects the pod any more: table removed
	ResultNone      = "none"      // no policy selects the pod, no table
	ResultFailed    = "failed"    // the rules could not be computed or written
)

// Writer writes a sandbox's rules into its network namespace
// (nftpolicy.Apply and nftpolicy.Remove).
type Writer interface {
	Apply(ctx context.Context, netns string, ifaces []policy.Interface) (nftpolicy.Stats, error)
	Remove(ctx context.Context, netns string) error
}

// nftWriter is the Writer of package nftpolicy.
type nftWriter struct{}

func (nftWriter) Apply(ctx context.Context, netns string, ifaces []policy.Interface) (nftpolicy.Stats, error) {
	return nftpolicy.Apply(ctx, netns, ifaces)
}

func (nftWriter) Remove(ctx context.Context, netns string) error { return nftpolicy.Remove(ctx, netns) }

// EventSink posts Events (kube.Events).
type EventSink interface {
	Warning(obj runtime.Object, reason, format string, args ...any)
}

// Observer is told about every sync of a sandbox (metrics).
type Observer interface {
	// PolicySynced: result is one of the Result constants; latency the
	// time from the change that caused the sync to its rules in place (0:
	// not caused by a change: ADD, multinetd's start); tables and rules the
	// node's sandboxes with a table and their rules after it.
	PolicySynced(result string, latency time.Duration, tables, rules int)
}

// PodGetter reads one pod from the API server (a sandbox's pod the
// cluster-wide informer does not have yet).
type PodGetter interface {
	Get(ctx context.Context, namespace, name string) (*corev1.Pod, error)
}

// Options configure a Controller. Store, Locks and the four informers are
// required.
type Options struct {
	// NodeName is this node.
	NodeName string
	// Store holds the attachment records of the node's sandboxes.
	Store *state.Store
	// Locks are the engine's per-container locks.
	Locks *keyedmutex.Map
	// Policies (NewPolicyInformer), Namespaces (labels), NADs and Pods
	// (NewPodInformer: every pod of the cluster) are the informers read;
	// the daemon runs them.
	Policies, Namespaces, NADs, Pods cache.SharedIndexInformer
	// Live reads a pod the Pods informer does not have yet; may be nil.
	Live PodGetter
	// Writer writes the rules; nil: nftpolicy's.
	Writer Writer
	// Events posts Warning Events on pods and policies; may be nil.
	Events EventSink
	// Observer is told about syncs; may be nil.
	Observer Observer
	// SyncWait bounds how long Enforce waits for the informers' first
	// list (after a restart). Default 5 s.
	SyncWait time.Duration
	// OpTimeout bounds one sync of a sandbox. Default 10 s.
	OpTimeout time.Duration
	// Workers sync sandboxes in parallel. Default 2.
	Workers int
}

// Controller enforces MultiNetworkPolicy on the node's sandboxes. Create
// it with New, register it with the engine (attach.Options.NetworkPolicy)
// and hot-plug, and Run it.
type Controller struct {
	opts   Options
	local  sandboxes
	peers  peers
	queue  workqueue.TypedRateLimitingInterface[string]
	report reporter

	mu      sync.Mutex
	pending map[string]time.Time // container ID -> first unsynced change
}

// New returns a Controller and registers its handlers on the informers
// (call it before they run). Errors: a required option is missing, a
// handler cannot be registered.
func New(opts Options) (*Controller, error) {
	if opts.Store == nil || opts.Locks == nil || opts.Policies == nil || opts.Namespaces == nil || opts.NADs == nil || opts.Pods == nil {
		return nil, errors.New("policysync: Store, Locks, Policies, Namespaces, NADs and Pods are required")
	}
	if opts.Writer == nil {
		opts.Writer = nftWriter{}
	}
	if opts.SyncWait <= 0 {
		opts.SyncWait = 5 * time.Second
	}
	if opts.OpTimeout <= 0 {
		opts.OpTimeout = 10 * time.Second
	}
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	c := &Controller{
		opts: opts,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "multinet-policy"}),
		pending: map[string]time.Time{},
	}
	c.report = reporter{events: opts.Events, posted: map[string]bool{}}
	if err := c.watch(); err != nil {
		return nil, err
	}
	return c, nil
}

// synced reports whether every informer has listed once.
func (c *Controller) synced() bool {
	o := c.opts
	return o.Policies.HasSynced() && o.Namespaces.HasSynced() && o.NADs.HasSynced() && o.Pods.HasSynced()
}

// waitSynced waits for synced within ctx and SyncWait.
func (c *Controller) waitSynced(ctx context.Context) error {
	if c.synced() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.SyncWait)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return errors.New("the MultiNetworkPolicy, namespace, NetworkAttachmentDefinition and pod informers have not listed yet")
	}
	return nil
}

// Run loads the node's records, syncs every sandbox once the informers
// have listed (a restart re-applies what is there: unchanged tables are
// not written, established connections are kept), then follows changes
// until ctx ends. Errors: the records cannot be listed.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	if err := c.loadRecords(); err != nil {
		return err
	}
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return nil
	}
	for _, id := range c.local.where(nil) {
		c.queue.Add(id) // no change time: not a latency sample
	}
	var wg sync.WaitGroup
	for range c.opts.Workers {
		wg.Go(func() {
			for c.processNext(ctx) {
			}
		})
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	return nil
}

// loadRecords keeps every complete record of the store as a sandbox whose
// netns may hold a table.
func (c *Controller) loadRecords() error {
	ids, err := c.opts.Store.List()
	if err != nil {
		return fmt.Errorf("policysync: list attachment records: %w", err)
	}
	for _, id := range ids {
		rec, err := c.opts.Store.Load(id)
		if err != nil || !rec.Complete || rec.Netns == "" {
			continue // corrupt or unfinished: DEL or the next ADD deals with it
		}
		c.local.set(rec, true)
	}
	return nil
}

// Enforce puts the rules of rec's sandbox in place (attach.PolicyEnforcer,
// hot-plug): called holding the container's lock. pod nil (an ADD naming
// no pod): nothing to do. Errors: the informers have not listed within
// SyncWait, the rules cannot be computed or written (a hot-plugged
// sandbox's sync is then retried from the queue).
func (c *Controller) Enforce(ctx context.Context, pod *corev1.Pod, rec *state.Record) error {
	if pod == nil || rec.PodName == "" {
		return nil
	}
	if err := c.waitSynced(ctx); err != nil {
		return err
	}
	id := rec.ContainerID
	_, known := c.local.get(id) // a hot-plug's; unknown: an ADD's
	c.local.set(rec, false)
	c.takePending(id)
	if err := c.syncLocked(ctx, id, time.Time{}, pod); err != nil {
		if known {
			c.queue.AddRateLimited(id)
		} else {
			c.local.forget(id) // the ADD fails and tears down
		}
		return err
	}
	return nil
}

// Release removes the rules of container containerID from netns (when it
// is there) and forgets the sandbox (attach.PolicyEnforcer).
func (c *Controller) Release(ctx context.Context, containerID, netns string) error {
	sb, known := c.local.get(containerID)
	c.local.forget(containerID)
	c.takePending(containerID)
	c.report.forget(containerID)
	if netns == "" || known && !sb.table || !exists(netns) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.OpTimeout)
	defer cancel()
	if err := c.opts.Writer.Remove(ctx, netns); err != nil {
		return err
	}
	c.observe(ResultRemoved, 0)
	return nil
}
