package attach

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apitypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/multinet/multinet/internal/node/cnirequest"
	"github.com/multinet/multinet/internal/node/kube"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/pkg/spec/devinfo"
	"github.com/multinet/multinet/pkg/spec/netconf"
)

// RecordObserver is told about corrupt attachment records (metrics). An
// Options.Observer that implements it gets the calls.
type RecordObserver interface {
	// CorruptRecord is called once per corrupt (or partial) record an
	// operation (ADD, DEL, GC) handled: outcome "recovered" when everything
	// it could name was torn down and nothing else can be left, "incomplete"
	// otherwise (a delegate DEL failed, or the pod's networks could not be
	// read).
	CorruptRecord(operation, outcome string)
}

func (e *Engine) corruptObserved(op, outcome string) {
	if o, ok := e.opts.Observer.(RecordObserver); ok {
		o.CorruptRecord(op, outcome)
	}
}

// salvaged is what can be known of a container whose record is corrupt.
type salvaged struct {
	rec *state.Record
	// whole: every attachment is known (the record's list was read to its
	// end, or the API server gave the pod's networks or said the pod is
	// gone). Otherwise attachments may exist that nothing here names.
	whole bool
	// sources says where the attachments came from, for messages.
	sources []string
	// aside is where the corrupt bytes were kept ("" when not moved).
	aside string
	// pod is the pod to post Events on (nil when it is not known).
	pod *corev1.Pod
	// apiErr is why the pod's networks could not be read (nil when they were).
	apiErr error
	// seen holds the network name and interface of every attachment added.
	seen map[string]bool
}

// salvage gathers every attachment of container id that can still be known
// when its record is corrupt (loadErr wraps state.ErrCorrupt) or partial
// (old.Partial, a record an earlier salvage saved): the attachments of the
// record's readable part (or of old), those libcni's cache holds for the
// container (every delegate ADD that succeeded and was not DELed), and, when
// req is set (ADD, DEL), the pod's networks as the API server gives them
// now, else the default network on req.IfName. The corrupt file is renamed
// aside (state.Store.SetAside) so that its bytes are never overwritten.
// Attachments are deduplicated by network name and interface.
func (e *Engine) salvage(ctx context.Context, cniPath, id string, req *cnirequest.Request, old *state.Record, loadErr error) *salvaged {
	log := klog.FromContext(ctx).WithValues("containerID", id)
	s := &salvaged{rec: &state.Record{ContainerID: id}, seen: map[string]bool{}}
	salvageRecord(log, s, e.opts.Store, id, old, loadErr)
	if req != nil {
		s.rec.Netns, s.rec.CNIArgs = req.Netns, req.RawArgs
	}
	salvageCache(log, s, e.cniFor(cniPath), id)

	args, aerr := parseArgs(s.rec.CNIArgs)
	if aerr == nil && args.HasPod() {
		s.rec.PodNamespace, s.rec.PodName, s.rec.PodUID = args.Namespace, args.Name, args.UID
	}
	if s.rec.PodNamespace != "" && s.rec.PodName != "" {
		// A reference for Events when the API server does not give the pod.
		s.pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: s.rec.PodNamespace, Name: s.rec.PodName, UID: apitypes.UID(s.rec.PodUID)}}
	}
	if req == nil {
		return s // GC: the container is gone; networks' GC reclaims the rest
	}
	plan, pod, apiErr := e.salvagePlan(ctx, req, args, aerr)
	if pod != nil {
		s.pod = pod
	}
	n := 0
	for _, a := range plan {
		if s.add(a) {
			n++
		}
	}
	if apiErr == nil {
		s.whole = true
		s.from("the pod's networks (API server)", n)
	} else {
		s.apiErr = apiErr
		s.from("the default network", n)
	}
	return s
}

// add appends a unless an attachment of its network and interface is
// already known, or its configuration does not parse; it reports whether
// it did.
func (s *salvaged) add(a state.Attachment) bool {
	list, err := libcni.ConfListFromBytes(a.ConfList)
	if err != nil {
		return false
	}
	k := list.Name + "\x00" + a.IfName
	if s.seen[k] {
		return false
	}
	s.seen[k] = true
	s.rec.Attachments = append(s.rec.Attachments, a)
	return true
}

// from notes that n attachments came from src, for messages.
func (s *salvaged) from(src string, n int) {
	if n > 0 {
		s.sources = append(s.sources, fmt.Sprintf("%d from %s", n, src))
	}
}

// salvageRecord adds the attachments of the corrupt record's readable part
// (loadErr set; the corrupt file is set aside) or of the partial record old.
func salvageRecord(log klog.Logger, s *salvaged, store *state.Store, id string, old *state.Record, loadErr error) {
	switch {
	case loadErr != nil:
		raw, err := store.ReadRaw(id)
		if err != nil {
			log.Error(err, "read the corrupt record")
		}
		r, whole := state.Salvage(raw, id)
		s.whole = whole
		s.rec.Netns, s.rec.CNIArgs = r.Netns, r.CNIArgs
		s.rec.PodNamespace, s.rec.PodName, s.rec.PodUID = r.PodNamespace, r.PodName, r.PodUID
		n := 0
		for _, a := range r.Attachments {
			if s.add(a) {
				n++
			}
		}
		s.from("the record's readable part", n)
		if s.aside, err = store.SetAside(id); err != nil {
			log.Error(err, "keep the corrupt record aside")
		}
	case old != nil:
		s.rec.Netns, s.rec.CNIArgs = old.Netns, old.CNIArgs
		s.rec.PodNamespace, s.rec.PodName, s.rec.PodUID = old.PodNamespace, old.PodName, old.PodUID
		for _, a := range old.Attachments {
			s.add(a)
		}
		s.from("the partial record", len(s.rec.Attachments))
	}
}

// cachedAttachments reads libcni's cache of a container's attachments.
type cachedAttachments interface {
	GetCachedAttachments(containerID string) ([]*libcni.NetworkAttachment, error)
}

// salvageCache adds the attachments libcni's cache holds for the
// container: the delegates' own account of what they attached. When no
// record gave the CNI_ARGS (GC of an unreadable one), the cache's are
// taken, so that the delegates get at DEL what they got at ADD.
func salvageCache(log klog.Logger, s *salvaged, cni cachedAttachments, id string) {
	cached, err := cni.GetCachedAttachments(id)
	if err != nil {
		log.Error(err, "read libcni's cache of the container's attachments")
	}
	n := 0
	for _, c := range cached {
		if s.rec.CNIArgs == "" && len(c.CniArgs) > 0 {
			pairs := make([]string, 0, len(c.CniArgs))
			for _, kv := range c.CniArgs {
				pairs = append(pairs, kv[0]+"="+kv[1])
			}
			s.rec.CNIArgs = strings.Join(pairs, ";")
		}
		if s.add(state.Attachment{Network: c.Network, IfName: c.IfName, ConfList: c.Config, CapabilityArgs: c.CapabilityArgs, Phase: state.PhaseAdded}) {
			n++
		}
	}
	s.from("libcni's cache", n)
}

// salvagePlan returns the attachments the API server gives for req's pod
// now (its networks, or the default network alone when the pod is gone or
// the request names none) and the pod. apiErr is set when the pod's
// networks could not be read (the API server is not answering); the
// default network is returned then.
func (e *Engine) salvagePlan(ctx context.Context, req *cnirequest.Request, args podArgs, argsErr error) ([]state.Attachment, *corev1.Pod, error) {
	runtimeConfig := req.RuntimeConfig
	pctx, cancel := context.WithTimeout(ctx, fallbackPlanTimeout)
	defer cancel()
	var apiErr error
	var p *plan
	switch {
	case argsErr != nil:
		apiErr = fmt.Errorf("CNI_ARGS: %w", argsErr)
	case !args.HasPod() || e.opts.Pods == nil:
		// no pod: the default network is all there is
	default:
		_, err := e.opts.Pods.Get(pctx, args.Namespace, args.Name, args.UID)
		switch {
		case err == nil:
			pp, perr := e.planner.plan(pctx, req.IfName, req.ContainerID, args, runtimeConfig, false)
			if perr == nil {
				p = pp
			} else if pp == nil || pp.pod == nil {
				apiErr = perr // the pod's lookup failed in between
			} // else: a NAD is gone or invalid: not knowable, the default network
		case apierrors.IsNotFound(err), errors.Is(err, kube.ErrUIDMismatch), errors.Is(err, kube.ErrPodGone):
			// the pod is gone: its networks cannot be known any more
		default:
			apiErr = err
		}
	}
	if p == nil {
		def, err := e.planner.defaultAttachment(nil, req.IfName, runtimeConfig)
		if err != nil {
			return nil, nil, errors.Join(apiErr, fmt.Errorf("the default network: %w", err))
		}
		p = &plan{attachments: []netconf.Attachment{def}, deviceInfoFiles: []string{""}}
	}
	var out []state.Attachment
	for i, a := range p.attachments {
		f := ""
		if i < len(p.deviceInfoFiles) {
			f = p.deviceInfoFiles[i]
		}
		if f == "" && a.Declares(netconf.CapDeviceInfoFile) {
			if u, err := devinfo.UniqueName(req.ContainerID, a.NetworkKey, a.IfName); err == nil {
				f, _ = e.opts.DevInfo.CNIPath(u)
			}
		}
		out = append(out, state.Attachment{
			Network: a.NetworkKey, Default: i == 0, Auxiliary: p.isAuxiliary(i), IfName: a.IfName,
			ConfList: a.ConfList.Bytes, CapabilityArgs: a.CapabilityArgs, CNIArgs: a.CNIArgs,
			Phase: state.PhasePlanned, DeviceInfoFile: f,
		})
	}
	return out, p.pod, apiErr
}

// describe says what the salvage found, for errors and Events.
func (s *salvaged) describe() string {
	var b strings.Builder
	if s.aside != "" {
		fmt.Fprintf(&b, "kept as %s; ", s.aside)
	}
	if len(s.sources) == 0 {
		b.WriteString("no attachment could be recovered")
	} else {
		fmt.Fprintf(&b, "attachments recovered: %s", strings.Join(s.sources, ", "))
	}
	return b.String()
}

// tearDownSalvaged tears down what salvage found for op (ADD, DEL, GC) and
// reports it: a Warning Event on the pod (when known), the log, the
// metric. done is true when everything known is torn down and nothing else
// can be left; then the caller goes on (ADD) or removes the record (DEL,
// GC). Otherwise the record is saved with what is left, marked Partial when
// the pod's networks are unknown, for the retry, and err says what could
// not be torn down.
func (e *Engine) tearDownSalvaged(ctx context.Context, op, cniPath, netns string, s *salvaged) (err error) {
	log := klog.FromContext(ctx).WithValues("containerID", s.rec.ContainerID)
	e.withdrawStatus(s.rec.ContainerID, s.rec)
	n := len(s.rec.Attachments)
	terr := e.teardown(ctx, cniPath, netns, s.rec, n)
	what := fmt.Sprintf("attachment record of sandbox %s is corrupt (%s)", s.rec.ContainerID, s.describe())
	if terr == nil && s.whole {
		log.Error(errors.New("corrupt attachment record"), op+": tore down what the corrupt record, libcni's cache and the API server name", "attachments", n, "recovered", s.describe())
		e.warningEvent(s.pod, kube.ReasonCorruptRecord, "%s: %d torn down", what, n)
		e.corruptObserved(op, "recovered")
		return nil
	}
	var problems []string
	if terr != nil {
		problems = append(problems, fmt.Sprintf("not torn down: %v", terr))
	}
	if !s.whole {
		problems = append(problems, fmt.Sprintf("the pod's other networks are unknown (%v): retried until the API server answers; CNI GC reclaims their addresses once the sandbox is gone", s.apiErr))
	}
	s.rec.Partial = !s.whole
	if op != "GC" || terr != nil {
		if serr := e.opts.Store.Save(s.rec); serr != nil {
			problems = append(problems, fmt.Sprintf("save what is left: %v", serr))
		}
	}
	msg := fmt.Sprintf("%s: %s", what, strings.Join(problems, "; "))
	log.Error(errors.New(msg), op+" of a corrupt attachment record is incomplete")
	e.warningEvent(s.pod, kube.ReasonCorruptRecord, "%s", msg)
	e.corruptObserved(op, "incomplete")
	return types.NewError(types.ErrTryAgainLater, msg, "")
}
