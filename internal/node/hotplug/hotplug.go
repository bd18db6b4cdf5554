// Package hotplug changes the attachments of running pod sandboxes
// (docs/hotplug.md): when the k8s.v1.cni.cncf.io/networks
// annotation of a running pod changes, multinetd attaches exactly the
// network selection elements that were added and detaches exactly those
// that were removed, in the sandbox's network namespace from its record,
// holding the container's lock (the one the runtime's ADD, DEL and CHECK
// hold). The record says which element each attachment was made for
// (state.Attachment.Element); podnetworks.DiffElements compares them with
// the annotation. Intent is saved before any delegate runs (the removals
// marked Detach, the additions planned and HotPlugged), the result after;
// a hot-plug interrupted by a crash is finished (detaches) or rolled back
// (attaches) by the next one, which then converges to the annotation as it
// is by then. The default network, multinetd's defaultNetworks, the
// auxiliary chain and the interface the runtime named are never touched.
package hotplug

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/multinet/multinet/internal/node/cnirequest"
	"github.com/multinet/multinet/internal/node/kube"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/pkg/spec/devinfo"
	"github.com/multinet/multinet/pkg/spec/netconf"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
	"github.com/multinet/multinet/pkg/spec/selection"
	"github.com/multinet/multinet/pkg/spec/status"
)

// Results of a hot-plug (Observer, the metrics' result label).
const (
	// Succeeded: the sandbox's attachments match the annotation.
	Succeeded = "succeeded"
	// Failed: a delegate, a lookup or a save failed; what failed was
	// rolled back and the hot-plug is retried.
	Failed = "failed"
	// Refused: the change cannot be made (an element that cannot be
	// hot-plugged, an annotation that does not parse, a sandbox attached
	// before hot-plug existed); only a new annotation helps.
	Refused = "refused"
)

// Observer is told about hot-plugs (multinetd's metrics).
type Observer interface {
	// HotPlugDone is called after each hot-plug that changed or tried to
	// change something, with its result (Succeeded, Failed,
	// Refused) and how long it took, the wait for the container's
	// lock included.
	HotPlugDone(result string, d time.Duration)
}

var (
	// ErrNoSandbox: the pod has no complete attachment record on this node
	// that hot-plug may change (no sandbox here, a host-network pod, a
	// sandbox being torn down or superseded). Nothing to do.
	ErrNoSandbox = errors.New("no attached pod sandbox on this node")
	// ErrBusy: the pod's sandbox has an operation in progress (its ADD has
	// not completed, a DEL or CHECK holds it); try again later.
	ErrBusy = errors.New("the pod's sandbox has an operation in progress")
)

// Error is a hot-plug that did not converge. Err says why (every
// element that was refused or failed, by network and interface).
type Error struct {
	// Retry is true when trying again may succeed (a delegate failed, a
	// NetworkAttachmentDefinition is missing, a lookup or a save failed);
	// false when only a new annotation can.
	Retry bool
	Err   error
}

func (e *Error) Error() string { return "hot-plug: " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Result is what one hot-plug changed.
type Result struct {
	// ContainerID is the pod sandbox.
	ContainerID string
	// Added and Removed are the attachments made and torn down, each
	// "namespace/name@ifname".
	Added, Removed []string
}

// hotPlugLockWait bounds how long a hot-plug waits for the container's
// lock; an operation that holds it longer makes the hot-plug ErrBusy.
const hotPlugLockWait = 2 * time.Second

// HotPlug converges the attachments of pod's sandbox on this node to the
// pod's k8s.v1.cni.cncf.io/networks annotation (docs/hotplug.md). It
// returns nil, nil when there is nothing to do; otherwise what it changed
// and, when not everything converged, a *Error. ErrNoSandbox: the
// pod has no sandbox hot-plug may change; ErrBusy (wrapped): another
// operation holds the sandbox, try later.
//
// Every rule of ADD applies to an added element (podnetworks.Check:
// isolation, the NAD, capabilities, cni-args; device-info files), plus
// podnetworks' hot-plug rules (no device networks, no "default-route").
// Generated interface names net1, net2, … of remaining attachments stay;
// an added element without "interface" gets the first netN no attachment
// of the sandbox uses and no element requests. A failed attach is rolled
// back (its DEL runs; the record forgets it) and posts a
// NetworkHotPlugFailed Warning; a failed detach stays in the record for
// the next attempt (or the runtime's DEL). network-status is written after
// every change (internal/node/netstatus), AddedInterface and RemovedInterface Events
// say what changed.
func (hp *HotPlugger) HotPlug(ctx context.Context, pod *corev1.Pod) (*Result, error) {
	start := time.Now()
	id, ok := hp.opts.Sandboxes.index.lookup(klog.FromContext(ctx), hp.opts.Store, pod.Namespace, pod.Name)
	if !ok {
		return nil, ErrNoSandbox
	}
	lctx, cancel := context.WithTimeout(ctx, hotPlugLockWait)
	unlock, err := hp.opts.Locks.Lock(lctx, id)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBusy, err)
	}
	defer unlock()

	rec, err := hp.opts.Store.Load(id)
	switch {
	case errors.Is(err, state.ErrNotFound):
		hp.opts.Sandboxes.index.forget(id)
		return nil, ErrNoSandbox
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrNoSandbox, err) // corrupt: DEL deals with it
	case !rec.Complete || rec.Partial:
		return nil, fmt.Errorf("%w: the ADD of container %s has not completed", ErrBusy, id)
	case !kube.IsRuntimePod(pod, rec.PodUID),
		rec.NetworkStatus != nil && rec.NetworkStatus.State == state.StatusWithdrawn:
		return nil, ErrNoSandbox // another pod of that name, or a superseded sandbox
	}
	if _, err := os.Stat(rec.Netns); err != nil {
		return nil, fmt.Errorf("%w: network namespace %s of container %s: %v", ErrNoSandbox, rec.Netns, id, err)
	}
	log := klog.FromContext(ctx).WithValues("containerID", id, "pod", podKey(pod.Namespace, pod.Name))
	if !rec.Selection {
		return nil, hp.hotPlugUnrecorded(pod, rec)
	}
	h := &hotPlug{hp: hp, eng: hp.opts.Engine, pod: pod, rec: rec, log: log, res: Result{ContainerID: id}}
	attempted, err := h.run(ctx)
	if !attempted {
		return nil, err
	}
	result := Succeeded
	var he *Error
	if errors.As(err, &he) {
		result = Failed
		if !he.Retry {
			result = Refused
		}
	}
	if o := hp.opts.Observer; o != nil {
		o.HotPlugDone(result, time.Since(start))
	}
	log.Info("hot-plug", "result", result, "added", h.res.Added, "removed", h.res.Removed)
	return &h.res, err
}

// hotPlugUnrecorded handles a sandbox whose record was written before
// hot-plug (no elements recorded): its annotation when first seen is taken
// as what it has; a later change is refused with one Warning per value.
func (hp *HotPlugger) hotPlugUnrecorded(pod *corev1.Pod, rec *state.Record) error {
	networks := pod.Annotations[selection.NetworksAnnotation]
	first, changed := hp.opts.Sandboxes.memo.baseline(rec.ContainerID, networks)
	if first || !changed {
		return nil
	}
	err := &Error{Err: fmt.Errorf("sandbox %s was attached by a multinetd that did not record its network selection elements: its networks cannot be hot-plugged (re-create the pod)", rec.ContainerID)}
	if hp.opts.Sandboxes.memo.warn(rec.ContainerID, networks) {
		hp.warningEvent(pod, kube.ReasonHotPlugFailed, "%s: %v", selection.NetworksAnnotation, err.Err)
		if o := hp.opts.Observer; o != nil {
			o.HotPlugDone(Refused, 0)
		}
	}
	return err
}

// hotPlug is one hot-plug of one sandbox; the container's lock is held.
type hotPlug struct {
	hp  *HotPlugger
	eng Engine
	pod *corev1.Pod
	rec *state.Record
	log klog.Logger
	res Result

	cniPath string
	args    cnirequest.Args
	// list is the network-status being maintained (the record's, with
	// the entries of detached attachments removed and of attached ones
	// added); nil when the record has none to publish.
	list []status.NetworkStatus
	// refused, failed are the problems met, for the error and Events.
	refused, failed []error
}

// run converges the sandbox and reports whether it changed, tried to
// change, or newly refused anything (false: nothing to do; err may still
// repeat a refusal already reported).
func (h *hotPlug) run(ctx context.Context) (attempted bool, err error) {
	rec := h.rec
	if h.cniPath, err = h.eng.CNIPath(rec.CNIPath); err != nil {
		return false, &Error{Retry: true, Err: err}
	}
	if h.args, err = cnirequest.ParseArgs(rec.CNIArgs); err != nil {
		return false, &Error{Err: fmt.Errorf("record of container %s: %w", rec.ContainerID, err)}
	}
	if ns := rec.NetworkStatus; ns != nil && h.hp.opts.Status != nil {
		if h.list, err = status.Decode(ns.Value); err != nil {
			h.log.Error(err, "the record's network-status does not decode; not written after this hot-plug")
			h.list = nil
		}
		// A hot-plug that crashed after detaching left their entries.
		h.list = recordedEntries(h.list, rec)
	}

	changed, err := h.finishInterrupted(ctx)
	if err != nil {
		return h.done(ctx, changed)
	}
	networks, present := h.pod.Annotations[selection.NetworksAnnotation]
	var elems []selection.Element
	if present {
		if elems, err = h.eng.ParseSelectionElements(networks, h.pod.Namespace); err != nil {
			// Never "nothing selected": a value that does not parse
			// changes nothing (the webhook denies it).
			h.refused = append(h.refused, fmt.Errorf("%s: %w", podnetworks.AnnotationField(selection.NetworksAnnotation), err))
			return h.done(ctx, changed)
		}
	}
	old, at, err := h.recordedElements()
	if err != nil {
		h.refused = append(h.refused, err)
		return h.done(ctx, changed)
	}
	d := podnetworks.DiffElements(old, elems)
	if d.Empty() && !changed {
		h.hp.opts.Sandboxes.memo.clearWarned(rec.ContainerID)
		return false, nil
	}
	rec.HotPlug = &state.HotPlug{Networks: networks, Started: time.Now().UTC()}
	removed, kept := h.removable(d.Removed, old, at)
	if h.detach(ctx, removed) {
		changed = true
	}
	added := slices.DeleteFunc(slices.Clone(d.Added), func(i int) bool { return kept[sameSlot(elems[i])] })
	if len(added) > 0 && h.attach(ctx, elems, added) {
		changed = true
	}
	return h.done(ctx, changed)
}

// sameSlot identifies what an element attaches: its network and requested
// interface.
func sameSlot(el selection.Element) string { return el.Key() + "@" + el.InterfaceRequest }

// removable returns the attachments (indices in the record) of the removed
// elements old[j], j in removed, that hot-plug may detach; the others are
// refused (podnetworks.HotPlugRemoveProblem) and their slots (sameSlot)
// returned, so that an element that changed into one of them is not added
// next to it.
func (h *hotPlug) removable(removed []int, old []selection.Element, at []int) (idx []int, kept map[string]bool) {
	kept = map[string]bool{}
	for _, j := range removed {
		if p := podnetworks.HotPlugRemoveProblem(old[j]); p != nil {
			h.refused = append(h.refused, p)
			kept[sameSlot(old[j])] = true
			continue
		}
		idx = append(idx, at[j])
	}
	return idx, kept
}

// recordedElements decodes the elements of the record's attachments that
// were made for the pod's network selection and are not being detached;
// at[i] is the attachment index of old[i].
func (h *hotPlug) recordedElements() (old []selection.Element, at []int, err error) {
	for i, a := range h.rec.Attachments {
		if a.Element == nil || a.Detach || a.Default || a.Auxiliary {
			continue
		}
		var el selection.Element
		if err := json.Unmarshal(a.Element, &el); err != nil {
			return nil, nil, fmt.Errorf("record of container %s: attachment %s (%s): its network selection element: %w", h.rec.ContainerID, a.Network, a.IfName, err)
		}
		old, at = append(old, el), append(at, i)
	}
	return old, at, nil
}

// finishInterrupted finishes what an interrupted hot-plug left: the
// attachments marked Detach are detached, the attaches it began
// (HotPlugged, PhasePlanned) rolled back. It reports whether the record
// changed; the error says what could not be torn down (kept for the next
// attempt).
func (h *hotPlug) finishInterrupted(ctx context.Context) (changed bool, err error) {
	var idx []int
	for i, a := range h.rec.Attachments {
		if a.Detach || (a.HotPlugged && a.Phase == state.PhasePlanned) {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 && h.rec.HotPlug == nil {
		return false, nil
	}
	h.log.Info("finishing an interrupted hot-plug", "attachments", len(idx))
	gone := map[int]bool{}
	for _, i := range slices.Backward(idx) {
		a := h.rec.Attachments[i]
		if err := h.tearDown(ctx, &a); err != nil {
			h.failed = append(h.failed, err)
			continue
		}
		gone[i] = true
		if a.Detach {
			h.detached(a)
		}
	}
	h.rec.Attachments = deleteIndices(h.rec.Attachments, gone)
	h.rec.HotPlug = nil
	return true, errors.Join(h.failed...)
}

// detach tears down the record's attachments idx, in reverse order, after
// saving the intent. It reports whether the record changed.
func (h *hotPlug) detach(ctx context.Context, idx []int) bool {
	if len(idx) == 0 {
		return false
	}
	for _, i := range idx {
		h.rec.Attachments[i].Detach = true
	}
	if err := h.hp.opts.Store.SaveBuffered(h.rec); err != nil {
		h.failed = append(h.failed, fmt.Errorf("save the record before detaching: %w", err))
		for _, i := range idx {
			h.rec.Attachments[i].Detach = false
		}
		return false
	}
	gone := map[int]bool{}
	for _, i := range slices.Backward(idx) {
		a := h.rec.Attachments[i]
		if err := h.tearDown(ctx, &a); err != nil {
			h.failed = append(h.failed, err)
			h.hp.warningEvent(h.pod, kube.ReasonHotPlugFailed, "remove %s from network %s: %s (the interface stays until a retry succeeds)", a.IfName, a.Network, cnirequest.ErrorMessage(err))
			continue
		}
		gone[i] = true
		h.detached(a)
	}
	h.rec.Attachments = deleteIndices(h.rec.Attachments, gone)
	return true
}

// detached notes that attachment a was torn down: out of network-status,
// into the result, a RemovedInterface Event.
func (h *hotPlug) detached(a state.Attachment) {
	h.list = slices.DeleteFunc(h.list, func(s status.NetworkStatus) bool {
		return !s.Default && s.Name == a.Network && s.Interface == a.IfName
	})
	h.res.Removed = append(h.res.Removed, a.Network+"@"+a.IfName)
	h.hp.normalEvent(h.pod, kube.ReasonRemovedInterface, "Remove %s from %s (hot-plug)", a.IfName, a.Network)
}

// tearDown runs the delegate DEL of attachment a of the sandbox and
// removes its device-info file.
func (h *hotPlug) tearDown(ctx context.Context, a *state.Attachment) error {
	if err := h.eng.DelAttachment(ctx, h.request(), a); err != nil {
		return err
	}
	if a.DeviceInfoFile != "" {
		if err := devinfo.RemoveFile(a.DeviceInfoFile); err != nil {
			h.log.Error(err, "remove the device-info file of a detached attachment", "file", a.DeviceInfoFile)
		}
	}
	return nil
}

// attach checks the added elements elems[i], i in added, with every rule
// of ADD and of hot-plug, plans them on interface names the sandbox does
// not use, saves the intent and runs each delegate ADD, rolling back the
// ones that fail. It reports whether the record changed.
func (h *hotPlug) attach(ctx context.Context, elems []selection.Element, added []int) bool {
	defIf := h.defaultIfName()
	v, err := h.eng.Check(ctx, h.pod, defIf)
	if err != nil {
		h.failed = append(h.failed, fmt.Errorf("pod %s/%s: %w", h.pod.Namespace, h.pod.Name, err))
		return false
	}
	ok := h.checkAdded(v, added)
	if len(ok) == 0 {
		return false
	}

	addElems := make([]selection.Element, len(ok))
	for k, i := range ok {
		addElems[k] = elems[i]
	}
	names, nameErrs := h.eng.IfNamesBeside(h.rec, addElems, defIf)

	first := len(h.rec.Attachments)
	var planned []netconf.Attachment
	var files []string
	for k, i := range ok {
		a := v.Attachments[i].Attachment
		a.IfName = names[k]
		a, file, el, err := h.planOne(a, nameErrs[k])
		if err != nil {
			h.failed = append(h.failed, err)
			h.hp.warningEvent(h.pod, kube.ReasonHotPlugFailed, "add network %s: %s", a.NetworkKey, cnirequest.ErrorMessage(err))
			continue
		}
		if u, found := podnetworks.UndeclaredOf(selection.NetworksAnnotation, &v.Attachments[i]); found {
			h.hp.warningEvent(h.pod, kube.ReasonUndeclaredCapability, "%s", u.Message())
		}
		planned, files = append(planned, a), append(files, file)
		h.rec.Attachments = append(h.rec.Attachments, state.Attachment{
			Network: a.NetworkKey, IfName: a.IfName, ConfList: a.ConfList.Bytes, CapabilityArgs: a.CapabilityArgs, CNIArgs: a.CNIArgs,
			Phase: state.PhasePlanned, DeviceInfoFile: file, Element: el, HotPlugged: true,
		})
	}
	if len(planned) == 0 {
		return false
	}
	if err := h.hp.opts.Store.SaveBuffered(h.rec); err != nil {
		h.failed = append(h.failed, fmt.Errorf("save the record before attaching: %w", err))
		for _, f := range files {
			if f != "" {
				_ = devinfo.RemoveFile(f)
			}
		}
		h.rec.Attachments = h.rec.Attachments[:first]
		return false
	}
	if !h.enforceBeforeAttach(ctx) {
		for _, f := range files {
			if f != "" {
				_ = devinfo.RemoveFile(f)
			}
		}
		h.rec.Attachments = h.rec.Attachments[:first] // no delegate ran; done saves the record without them
		return true
	}
	gone := map[int]bool{}
	for k := range planned {
		if !h.attachOne(ctx, &planned[k], first+k, files[k]) {
			gone[first+k] = true
		}
	}
	h.rec.Attachments = deleteIndices(h.rec.Attachments, gone)
	return true
}

// checkAdded returns the added elements (indices of v.Elements) that may
// be attached: Check found no problem with them and podnetworks' hot-plug
// rules allow them. Check's problems (a missing NAD, a key no plugin is
// capable of, isolation) may go away when NADs change: they fail the
// hot-plug (retried) with a Warning; the hot-plug rules' refusals do not.
func (h *hotPlug) checkAdded(v *podnetworks.Verdict, added []int) []int {
	problems := map[int][]podnetworks.Problem{}
	for _, p := range v.Problems {
		if p.Annotation == selection.NetworksAnnotation && p.Index >= 0 {
			problems[p.Index] = append(problems[p.Index], p)
		}
	}
	var ok []int
	for _, i := range added {
		if refusals := v.HotPlugAddProblems(i); len(refusals) > 0 {
			for _, p := range refusals {
				h.refused = append(h.refused, p)
			}
			continue
		}
		probs := problems[i]
		if len(probs) == 0 && (i >= len(v.Attachments) || !v.Attachments[i].Planned) {
			probs = append(probs, podnetworks.Problem{Annotation: selection.NetworksAnnotation, Field: podnetworks.AnnotationField(selection.NetworksAnnotation), Index: i,
				Err: fmt.Errorf("networks[%d]: not checked", i)})
		}
		if len(probs) > 0 {
			err := &podnetworks.Error{Problems: probs}
			h.failed = append(h.failed, err)
			h.hp.warningEvent(h.pod, kube.ReasonHotPlugFailed, "%v", err)
			continue
		}
		ok = append(ok, i)
	}
	return ok
}

// planOne prepares the attach of a (planned by Check, on its hot-plug
// interface name, nameErr the name's problem): its element must encode
// (el, state.Attachment.Element); the engine checks its plugins exist,
// prepares its device-info file (file, "" when none) and remembers its
// network for GC.
func (h *hotPlug) planOne(a netconf.Attachment, nameErr error) (prepared netconf.Attachment, file string, el []byte, err error) {
	if nameErr != nil {
		return a, "", nil, fmt.Errorf("network %s: %w (spec §4.1.2.1.5)", a.NetworkKey, nameErr)
	}
	if el, err = a.Element.MarshalJSON(); err != nil {
		return a, "", nil, fmt.Errorf("network %s: encode its network selection element: %w", a.NetworkKey, err)
	}
	prepared, file, err = h.eng.Prepare(h.cniPath, h.rec.ContainerID, a)
	if err != nil {
		return a, "", nil, err
	}
	return prepared, file, el, nil
}

// request is the CNI request of the sandbox's attachments: its container,
// netns, CNI_PATH and the recorded CNI_ARGS.
func (h *hotPlug) request() *cnirequest.Request {
	return &cnirequest.Request{ContainerID: h.rec.ContainerID, Netns: h.rec.Netns, CNIPath: h.cniPath, RawArgs: h.rec.CNIArgs, Args: h.args}
}

// attachOne runs the delegate ADD of planned attachment a, record entry i,
// and reports whether it is attached; a failure is rolled back (false) or,
// when the rollback fails too, left planned for the next attempt (true).
func (h *hotPlug) attachOne(ctx context.Context, a *netconf.Attachment, i int, deviceInfoFile string) bool {
	res, err := h.eng.AddAttachment(ctx, h.request(), a)
	var raw []byte
	if err == nil {
		raw, err = json.Marshal(res)
	}
	var st status.NetworkStatus
	if err == nil && h.list != nil {
		st, err = h.eng.StatusEntry(h.pod, a, res, deviceInfoFile)
	}
	if err != nil {
		h.failed = append(h.failed, err)
		msg, kept := cnirequest.ErrorMessage(err), false
		if rerr := h.tearDown(ctx, &h.rec.Attachments[i]); rerr != nil {
			msg += fmt.Sprintf(" (and rolling it back: %s; retried)", cnirequest.ErrorMessage(rerr))
			h.failed = append(h.failed, rerr)
			kept = true
		} else {
			msg += " (rolled back)"
		}
		h.hp.warningEvent(h.pod, kube.ReasonHotPlugFailed, "add %s from network %s: %s", a.IfName, a.NetworkKey, msg)
		return kept
	}
	h.rec.Attachments[i].Phase, h.rec.Attachments[i].Result = state.PhaseAdded, raw
	if h.list != nil {
		h.list = append(h.list, st)
	}
	h.res.Added = append(h.res.Added, a.NetworkKey+"@"+a.IfName)
	h.hp.normalEvent(h.pod, kube.ReasonAddedInterface, "Add %s %v from %s (hot-plug)", a.IfName, st.IPs, a.NetworkKey)
	return true
}

// defaultIfName is the interface the runtime named (the default network's).
func (h *hotPlug) defaultIfName() string {
	for _, a := range h.rec.Attachments {
		if a.Default {
			return a.IfName
		}
	}
	return podnetworks.DefaultIfName
}

// done saves the record (durably) when it changed and publishes its
// network-status; it posts the Warning of refusals not reported before for
// this annotation value. attempted: something changed, failed, or was
// newly refused. err: nil when everything converged, else a *Error.
func (h *hotPlug) done(ctx context.Context, changed bool) (attempted bool, err error) {
	hp, rec := h.hp, h.rec
	if changed {
		rec.HotPlug = nil
		h.setStatus()
		if err := hp.opts.Store.Save(rec); err != nil {
			// The buffered intent stays on disk: the next hot-plug rolls
			// back what it planned and converges again.
			h.failed = append(h.failed, fmt.Errorf("save the record: %w", err))
		} else {
			h.enforcePolicy(ctx)
			if rec.Pending() && hp.opts.Status != nil {
				hp.opts.Status.Publish(ctx, h.pod, rec)
			}
		}
	}
	news := false
	if len(h.refused) > 0 {
		news = hp.opts.Sandboxes.memo.warn(rec.ContainerID, h.pod.Annotations[selection.NetworksAnnotation])
		if news {
			hp.warningEvent(h.pod, kube.ReasonHotPlugFailed, "%v", errors.Join(h.refused...))
		}
	} else {
		hp.opts.Sandboxes.memo.clearWarned(rec.ContainerID)
	}
	attempted = changed || len(h.failed) > 0 || news
	errs := append(slices.Clone(h.failed), h.refused...)
	if len(errs) == 0 {
		return attempted, nil
	}
	return attempted, &Error{Retry: len(h.failed) > 0, Err: errors.Join(errs...)}
}

// enforceBeforeAttach puts the sandbox's MultiNetworkPolicy rules in
// place for its planned attachments before their delegates make the
// interfaces (policysync.TargetPod counts a planned attachment), so that a
// pod a policy selects is never reachable on a hot-plugged interface
// without its rules. When they cannot be written, it reports false with a
// Warning Event and the hot-plug fails (retried): nothing is attached.
func (h *hotPlug) enforceBeforeAttach(ctx context.Context) bool {
	if h.hp.opts.NetworkPolicy == nil {
		return true
	}
	err := h.hp.opts.NetworkPolicy.Enforce(ctx, h.pod, h.rec)
	if err == nil {
		return true
	}
	h.failed = append(h.failed, fmt.Errorf("network policy of the new interfaces: %w", err))
	h.hp.warningEvent(h.pod, kube.ReasonHotPlugFailed, "add networks: the network policy rules of the new interfaces cannot be put in place, nothing attached (retried): %v", err)
	return false
}

// enforcePolicy puts the sandbox's MultiNetworkPolicy rules in place for
// its attachments after the change (a failure is retried with the
// hot-plug; the policy controller retries it too).
func (h *hotPlug) enforcePolicy(ctx context.Context) {
	if h.hp.opts.NetworkPolicy == nil {
		return
	}
	if err := h.hp.opts.NetworkPolicy.Enforce(ctx, h.pod, h.rec); err != nil {
		h.failed = append(h.failed, fmt.Errorf("network policy: %w", err))
	}
}

// setStatus puts the network-status of the record's attachments into the
// record, pending when it differs from what was published (or that had not
// landed yet). The list keeps the default network's entry and the entries
// of attachments the record has (added; one whose detach failed too): an
// entry of an attachment a crashed hot-plug detached goes.
func (h *hotPlug) setStatus() {
	if h.list == nil {
		return
	}
	value, err := status.Encode(recordedEntries(h.list, h.rec))
	if err != nil {
		h.log.Error(err, "encode network-status")
		return
	}
	if old := h.rec.NetworkStatus; old != nil && old.Value == value && old.PodUID == string(h.pod.UID) {
		return // unchanged: published, or still pending for the retrier
	}
	h.rec.NetworkStatus = &state.NetworkStatus{Value: value, PodUID: string(h.pod.UID), State: state.StatusPending}
}

// recordedEntries returns the entries of list that are the default
// network's or an attachment's that rec has added (one whose detach failed
// included); list is reused. An attachment is identified by network and
// interface, so an entry left by an attachment detached before a crash
// must go before the same network is attached on that interface again.
func recordedEntries(list []status.NetworkStatus, rec *state.Record) []status.NetworkStatus {
	have := map[string]bool{}
	for _, a := range rec.Attachments {
		if a.Phase == state.PhaseAdded {
			have[a.Network+"@"+a.IfName] = true
		}
	}
	return slices.DeleteFunc(list, func(s status.NetworkStatus) bool { return !s.Default && !have[s.Name+"@"+s.Interface] })
}

// deleteIndices returns atts without the indices in gone, in order.
func deleteIndices(atts []state.Attachment, gone map[int]bool) []state.Attachment {
	if len(gone) == 0 {
		return atts
	}
	out := atts[:0]
	for i, a := range atts {
		if !gone[i] {
			out = append(out, a)
		}
	}
	return out
}

// hotplugMemo remembers, per container, what hot-plug has already said
// about it, so that pod updates that change nothing do not repeat it.
type hotplugMemo struct {
	mu sync.Mutex
	// warned is the annotation value whose refusals were reported.
	warned map[string]string
	// baselines are the annotations of sandboxes without recorded
	// elements when first seen.
	baselines map[string]string
}

// warn reports whether refusals of networks for container id are news,
// and remembers them.
func (m *hotplugMemo) warn(id, networks string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.warned == nil {
		m.warned = map[string]string{}
	}
	if v, ok := m.warned[id]; ok && v == networks {
		return false
	}
	m.warned[id] = networks
	return true
}

// clearWarned forgets the refusals reported for container id (its
// annotation converged or has nothing refused any more).
func (m *hotplugMemo) clearWarned(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.warned, id)
}

// baseline returns whether container id is seen for the first time (its
// annotation networks then becomes its baseline) and whether networks
// differs from the baseline.
func (m *hotplugMemo) baseline(id, networks string) (first, changed bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.baselines == nil {
		m.baselines = map[string]string{}
	}
	b, ok := m.baselines[id]
	if !ok {
		m.baselines[id] = networks
		return true, false
	}
	return false, b != networks
}

// forget drops what is remembered of container id.
func (m *hotplugMemo) forget(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.warned, id)
	delete(m.baselines, id)
}

// sandboxIndex maps each pod (namespace/name) to the container ID of its
// newest complete attachment record, for hot-plug. It is built from the
// records on first use and kept by ADD (set) and DEL (forget).
type sandboxIndex struct {
	mu    sync.Mutex
	built bool
	byPod map[string]sandboxEntry
}

type sandboxEntry struct {
	id      string
	updated time.Time
}

// set records rec as its pod's sandbox when it is complete and newer.
func (x *sandboxIndex) set(rec *state.Record) {
	if rec.PodName == "" || !rec.Complete {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.built {
		return // the first lookup reads every record
	}
	k := podKey(rec.PodNamespace, rec.PodName)
	if cur, ok := x.byPod[k]; ok && cur.id != rec.ContainerID && cur.updated.After(rec.Updated) {
		return
	}
	x.byPod[k] = sandboxEntry{id: rec.ContainerID, updated: rec.Updated}
}

// forget drops container id.
func (x *sandboxIndex) forget(id string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for k, s := range x.byPod {
		if s.id == id {
			delete(x.byPod, k)
		}
	}
}

// lookup returns the container ID of pod namespace/name's sandbox.
func (x *sandboxIndex) lookup(log klog.Logger, store *state.Store, namespace, name string) (string, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.built {
		x.build(log, store)
	}
	s, ok := x.byPod[podKey(namespace, name)]
	return s.id, ok
}

// build reads every record (x.mu held). Records that cannot be read are
// left out (DEL, GC and the reaper deal with them).
func (x *sandboxIndex) build(log klog.Logger, store *state.Store) {
	x.byPod = map[string]sandboxEntry{}
	ids, err := store.List()
	if err != nil {
		log.Error(err, "hot-plug: list the attachment records; retried at the next hot-plug")
		return
	}
	for _, id := range ids {
		rec, err := store.Load(id)
		if err != nil || rec.PodName == "" || !rec.Complete {
			continue
		}
		k := podKey(rec.PodNamespace, rec.PodName)
		if cur, ok := x.byPod[k]; !ok || rec.Updated.After(cur.updated) {
			x.byPod[k] = sandboxEntry{id: id, updated: rec.Updated}
		}
	}
	x.built = true
}

func podKey(namespace, name string) string { return namespace + "/" + name }
