package attach

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/multinet/multinet/internal/devices/draclaims"
	"github.com/multinet/multinet/internal/node/cnirequest"
	"github.com/multinet/multinet/internal/node/kube"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/pkg/spec/devinfo"
	"github.com/multinet/multinet/pkg/spec/netconf"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
	"github.com/multinet/multinet/pkg/spec/status"
)

type libcniList = libcni.NetworkConfigList

// Add performs CNI ADD for one pod sandbox (docs/multinetd.md "What it does on ADD"):
// the default network on the runtime's CNI_IFNAME, then every selected
// network in annotation order (spec §6.2, §4). The record of the attachments
// is written before any delegate runs and again, with the results and the
// network-status (§5) to publish, before Add returns; network-status is then
// PATCHed (Options.Status, internal/node/netstatus: after the record, retried in the background).
//
// It returns the default network's result in the cniVersion of the runtime's
// configuration. Errors are *types.Error naming the network, the plugin and
// the reason; when a delegate fails, the attachments already made are torn
// down first (spec §7.2) and a Warning Event is posted on the pod. An ADD
// that fails before any delegate ran leaves a record with no attachments
// (failUnattempted), so that its DEL has nothing to do.
func (e *Engine) Add(ctx context.Context, req *cnirequest.Request) ([]byte, error) {
	unlock, err := e.locks.Lock(ctx, req.ContainerID)
	if err != nil {
		return nil, types.NewError(types.ErrTryAgainLater, err.Error(), "")
	}
	defer unlock()

	log := klog.FromContext(ctx).WithValues("containerID", req.ContainerID)
	if err := e.tearDownEarlierAdd(ctx, req, log); err != nil {
		return nil, err
	}

	if req.Invalid != nil { // no cniVersion, malformed CNI_ARGS or runtimeConfig
		return nil, e.failUnattempted(log, req, nil, req.Invalid)
	}
	log = log.WithValues("pod", req.Args.Namespace+"/"+req.Args.Name)

	p, err := e.planner.plan(ctx, req.IfName, req.ContainerID, req.Args, req.RuntimeConfig, true)
	if err != nil {
		return nil, e.failUnattempted(log, req, p, err)
	}
	if err := e.findPlugins(req.CNIPath, p); err != nil {
		return nil, e.failUnattempted(log, req, p, err)
	}
	e.warnUndeclared(p.pod, p.undeclared...)

	rec, err := plannedRecord(req, p)
	if err != nil {
		return nil, e.failUnattempted(log, req, p, types.NewError(types.ErrInternal, err.Error(), ""))
	}
	// The plan needs to outlive a daemon crash during this ADD, not a
	// power loss (the netns would be gone): no fsync. The final Save in
	// addOp.commit is made durable by the store's group commit (or before it
	// returns, recordSync: each).
	if err := e.opts.Store.SaveBuffered(rec); err != nil {
		return nil, e.failUnattempted(log, req, p, types.NewError(types.ErrInternal, fmt.Sprintf("save attachment record: %v", err), ""))
	}
	e.rememberNetworks(log, p) // for GC, should this record be lost (networks.go)

	op := &addOp{e: e, log: log, req: req, rec: rec, p: p}
	results, err := op.attachAll(ctx)
	if err != nil {
		return nil, err
	}
	routedVia, err := op.routeDefault(ctx, results)
	if err != nil {
		return nil, err
	}
	list, err := e.networkStatus(p, results, routedVia)
	if err != nil {
		return nil, e.failAdd(ctx, req, rec, p, len(p.attachments), err)
	}
	body, err := defaultResult(p, results, req.CNIVersion)
	if err != nil {
		return nil, e.failAdd(ctx, req, rec, p, len(p.attachments), err)
	}
	if err := op.commit(ctx, list, results); err != nil {
		return nil, err
	}
	log.V(1).Info("ADD done", "attachments", len(p.attachments))
	return body, nil
}

// plannedRecord is the record of ADD req before any delegate runs: every
// planned attachment in PhasePlanned. Errors: an attachment's network
// selection element cannot be encoded.
func plannedRecord(req *cnirequest.Request, p *plan) (*state.Record, error) {
	args := req.Args
	rec := &state.Record{
		ContainerID:  req.ContainerID,
		Netns:        req.Netns,
		PodNamespace: args.Namespace,
		PodName:      args.Name,
		PodUID:       args.UID,
		CNIArgs:      req.RawArgs,
		CNIPath:      req.CNIPath,
		Selection:    true,
	}
	for i, a := range p.attachments {
		el, err := p.element(i)
		if err != nil {
			return nil, err
		}
		rec.Attachments = append(rec.Attachments, state.Attachment{
			Element:        el,
			Network:        a.NetworkKey,
			Default:        i == 0,
			Auxiliary:      p.isAuxiliary(i),
			IfName:         a.IfName,
			ConfList:       a.ConfList.Bytes,
			CapabilityArgs: a.CapabilityArgs,
			CNIArgs:        a.CNIArgs,
			Phase:          state.PhasePlanned,
			DeviceInfoFile: p.deviceInfoFiles[i],
			DeviceID:       p.deviceIDs[i],
			Claim:          draclaims.ToState(p.claimDevices[i]),
		})
	}
	return rec, nil
}

// addOp is one ADD past its plan: the steps of Engine.Add that run
// delegates and commit their outcome.
type addOp struct {
	e   *Engine
	log klog.Logger
	req *cnirequest.Request
	rec *state.Record
	p   *plan
}

// attachAll runs each planned attachment's delegates in order (an
// auxiliary chain onto the default network's result) and records each
// result in rec. On a failure the attachments made are torn down (failAdd)
// and its error returned.
func (op *addOp) attachAll(ctx context.Context) ([]types.Result, error) {
	e, log, req, rec, p := op.e, op.log, op.req, op.rec, op.p
	cni := e.cniFor(req.CNIPath)
	results := make([]types.Result, len(p.attachments))
	for i := range p.attachments {
		a := &p.attachments[i]
		alog := log.WithValues("network", a.NetworkKey, "ifName", a.IfName)
		if p.isAuxiliary(i) {
			if err := a.ChainOnto(results[0]); err != nil {
				return nil, e.failAdd(ctx, req, rec, p, i-1, types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("auxiliary chain: %v", err), ""))
			}
			rec.Attachments[i].ConfList = a.ConfList.Bytes
		}
		res, err := e.runAdd(ctx, cni, a, req)
		if err != nil {
			alog.Error(err, "delegate ADD failed")
			return nil, e.failAdd(ctx, req, rec, p, i, err)
		}
		results[i] = res
		raw, err := json.Marshal(res)
		if err != nil {
			return nil, e.failAdd(ctx, req, rec, p, i+1, fmt.Errorf("network %s: encode result: %w", a.NetworkKey, err))
		}
		rec.Attachments[i].Phase = state.PhaseAdded
		rec.Attachments[i].Result = raw
		alog.V(2).Info("attached")
	}
	return results, nil
}

// routeDefault moves the pod's default route onto the attachment whose
// element asks for it ("default-route", spec §4.1.2.1.9) and returns the
// gateways it routes through. On a failure the attachments are torn down
// (failAdd) and its error returned.
func (op *addOp) routeDefault(ctx context.Context, results []types.Result) ([]string, error) {
	e, req, rec, p := op.e, op.req, op.rec, op.p
	if !p.gatewayRequested {
		return nil, nil
	}
	routedVia, err := setDefaultRoute(req.Netns, p, results)
	if err != nil {
		return nil, e.failAdd(ctx, req, rec, p, len(p.attachments), err)
	}
	if len(routedVia) == 0 {
		// "default-route": [] (the list "may be empty", §4.1.2.1.9) and
		// the attachment's result has no gateway: nothing to route
		// through, so no default route request. The pod keeps its
		// default routes and network-status reports them on the default
		// network, as when no element has the key.
		a := p.attachments[p.gateway]
		e.warningEvent(p.pod, kube.ReasonValueIgnored, "network %s: %q: [] asks for the pod's default route on %s, but its CNI result has no gateway: no default route changed, the pod keeps the default network's (spec §4.1.2.1.9)",
			a.NetworkKey, "default-route", a.IfName)
		p.gateway = 0
	}
	return routedVia, nil
}

// defaultResult is the default network's result, encoded in cniVersion
// (the runtime's configuration's): what ADD returns.
func defaultResult(p *plan, results []types.Result, cniVersion string) ([]byte, error) {
	out, err := results[0].GetAsVersion(cniVersion)
	if err != nil {
		return nil, fmt.Errorf("default network %s: convert its result to cniVersion %s: %w", p.attachments[0].NetworkKey, cniVersion, err)
	}
	body, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	return body, nil
}

// commit ends a successful ADD: the pod's MultiNetworkPolicy rules in
// place before the pod runs, the final record saved (with the
// network-status to publish), network-status published, DRA claims and the
// sandbox noted, an Event per attached interface. A failed save fails the
// ADD and tears the attachments down, nothing published; a failed PATCH
// stays pending in the record, retried in the background
// (internal/node/netstatus).
func (op *addOp) commit(ctx context.Context, list []status.NetworkStatus, results []types.Result) error {
	e, log, req, rec, p := op.e, op.log, op.req, op.rec, op.p
	if err := enforcePolicy(ctx, e.opts.NetworkPolicy, p.pod, rec); err != nil {
		return e.failAdd(ctx, req, rec, p, len(p.attachments), err)
	}
	rec.Complete = true
	rec.NetworkStatus = e.statusIntent(log, p, list)
	if err := e.opts.Store.Save(rec); err != nil {
		rec.Complete, rec.NetworkStatus = false, nil
		return e.failAdd(ctx, req, rec, p, len(p.attachments), fmt.Errorf("save attachment record: %w", err))
	}
	if rec.NetworkStatus != nil {
		e.publishStatus(ctx, p.pod, rec)
	}
	e.claimsReady(ctx, p, results)
	e.sandboxAttached(rec) // the pod's sandbox for hot-plug
	if p.pod != nil {
		for i, s := range list {
			if i > 0 {
				e.normalEvent(p.pod, kube.ReasonAddedInterface, "Add %s %v from %s", s.Interface, s.IPs, s.Name)
			}
		}
	}
	return nil
}

// tearDownEarlierAdd tears down the attachments recorded by an earlier ADD
// of the same container (the runtime retried after a crash or a timeout), so
// that ADD starts from nothing. A missing or empty record is left as it is;
// over a corrupt (or partial) one it tears down what the record's readable
// part, libcni's cache and the API server name (salvage.go) instead of
// overwriting it, which leaked the earlier ADD's attachments. Errors
// (*types.Error, code 11): a delegate DEL failed, or the pod's networks
// cannot be read to complete a salvage; the record then keeps what is left
// for the retry or the runtime's DEL.
func (e *Engine) tearDownEarlierAdd(ctx context.Context, req *cnirequest.Request, log klog.Logger) error {
	old, err := e.opts.Store.Load(req.ContainerID)
	if errors.Is(err, state.ErrCorrupt) || (err == nil && old.Partial) {
		s := e.salvage(ctx, req.CNIPath, req.ContainerID, req, old, err)
		return e.tearDownSalvaged(ctx, "ADD", req.CNIPath, req.Netns, s)
	}
	if err != nil || len(old.Attachments) == 0 {
		return nil
	}
	log.Info("tearing down the attachments of an earlier ADD", "attachments", len(old.Attachments))
	e.withdrawStatus(req.ContainerID, old) // its network-status lists them
	terr := e.teardown(ctx, req.CNIPath, req.Netns, old, len(old.Attachments))
	if terr == nil {
		return nil
	}
	if err := e.opts.Store.Save(old); err != nil {
		log.Error(err, "save the attachments left of an earlier ADD")
	}
	return types.NewError(types.ErrTryAgainLater, fmt.Sprintf("tear down the earlier ADD of container %s: %v", req.ContainerID, terr), "")
}

// failUnattempted ends an ADD that fails before any delegate ran: the
// request, the plan (pod, annotation, NADs, devices) or a plugin binary is
// unusable, or the plan could not be saved. It removes the CNI device-info
// files the plan prepared, saves a record with no attachments, posts the
// Warning Event on the pod (when known) and returns cause unchanged.
//
// The record says what was attempted: nothing. The runtime's DEL that
// follows then tears nothing down and needs neither the API server nor the
// delegates (multi-net spec §7.2 tears down the attachments "that were
// attempted during pod network setup"). Without it, DEL would rebuild the
// pod's current selection from the API and run the DEL of delegates that
// never ran, which fails for a plugin whose binary does not exist and keeps
// the pod Terminating. A corrupt record is left for DEL's fallback; a record
// that cannot be saved is logged (DEL then falls back to the API).
func (e *Engine) failUnattempted(log klog.Logger, req *cnirequest.Request, p *plan, cause error) error {
	log.Error(cause, "ADD failed before any delegate ran")
	if p != nil {
		for _, f := range p.deviceInfoFiles {
			if f != "" {
				_ = devinfo.RemoveFile(f)
			}
		}
	}
	if err := e.saveUnattempted(req); err != nil {
		log.Error(err, "save the record of an ADD that attempted nothing")
	}
	e.warn(p, cause)
	e.claimsFailed(p, cnirequest.ErrorMessage(cause))
	return cause
}

// saveUnattempted saves the record of container req.ContainerID with no
// attachments, unless a corrupt record is there (DEL reports it and falls
// back to the API). Errors: the record cannot be written.
func (e *Engine) saveUnattempted(req *cnirequest.Request) error {
	if _, err := e.opts.Store.Load(req.ContainerID); errors.Is(err, state.ErrCorrupt) {
		return nil
	}
	rec := &state.Record{ContainerID: req.ContainerID, Netns: req.Netns, CNIArgs: req.RawArgs}
	if req.ArgsErr == nil {
		rec.PodNamespace, rec.PodName, rec.PodUID = req.Args.Namespace, req.Args.Name, req.Args.UID
	}
	if err := e.opts.Store.Save(rec); err != nil {
		return fmt.Errorf("container %s: %w", req.ContainerID, err)
	}
	return nil
}

// runAdd runs one delegate ADD with the delegate timeout. A delegate that
// does not answer in time fails with an error naming the network and what
// ran out (delegateErr).
func (e *Engine) runAdd(ctx context.Context, cni *libcni.CNIConfig, a *netconf.Attachment, req *cnirequest.Request) (types.Result, error) {
	ctx, cancel := delegateContext(ctx, e.opts.DelegateTimeout, "delegateTimeout")
	defer cancel()
	start := time.Now()
	rt := a.RuntimeConf(req.ContainerID, req.Netns, req.Args.Pairs)
	rt.Args = append(rt.Args, cnirequest.NetworkNamespaceArg(a.NetworkKey))
	res, err := cni.AddNetworkList(ctx, a.ConfList, rt)
	e.observe("ADD", a.ConfList, start, err)
	if err != nil {
		return nil, delegateErr("ADD", a.NetworkKey, a.IfName, a.ConfList, ctx, err)
	}
	return res, nil
}

// findPlugins checks that every plugin of the plan is in the delegates'
// CNI_PATH, so that a missing binary fails the ADD before any delegate runs:
// found half-way, it would leave a config list whose DEL cannot run either
// (libcni stops a list's DEL at the missing plugin), and the pod could never
// be torn down.
func (e *Engine) findPlugins(reqPath string, p *plan) error {
	dirs := e.cniFor(reqPath).Path
	for _, a := range p.attachments {
		for _, pl := range a.ConfList.Plugins {
			var err error
			if e.opts.Exec != nil {
				_, err = e.opts.Exec.FindInPath(pl.Network.Type, dirs)
			} else {
				_, err = invoke.FindInPath(pl.Network.Type, dirs)
			}
			if err != nil {
				return planError(types.ErrInvalidNetworkConfig, "network %s (interface %s, plugin %s): %v", a.NetworkKey, a.IfName, pl.Network.Type, err)
			}
		}
	}
	return nil
}

// failAdd tears down attachments [0, made] (the failed one included: a
// delegate may have half-made it), posts the Warning Event and returns the
// CNI error for the runtime (spec §7.2). The teardown is bounded
// (teardownContext: the request's deadline plus TeardownGrace per
// attachment); what could not be torn down stays in the record so that the
// runtime's DEL retries it, and the error and the Event say so.
func (e *Engine) failAdd(ctx context.Context, req *cnirequest.Request, rec *state.Record, p *plan, made int, cause error) error {
	n := made + 1
	if n > len(rec.Attachments) {
		n = len(rec.Attachments)
	}
	for _, a := range rec.Attachments[n:] { // never attempted
		if a.DeviceInfoFile != "" {
			_ = devinfo.RemoveFile(a.DeviceInfoFile)
		}
	}
	rec.Attachments = rec.Attachments[:n]
	tctx, cancel := e.teardownContext(ctx, n)
	terr := e.teardown(tctx, req.CNIPath, req.Netns, rec, n)
	cancel()
	if terr == nil {
		// Keep an empty record: the runtime's DEL that follows a failed ADD
		// then has nothing to do and needs no API call.
		rec.Attachments = nil
	}
	if err := e.opts.Store.Save(rec); err != nil {
		klog.FromContext(ctx).Error(err, "save attachment record after a failed ADD", "containerID", req.ContainerID)
	}
	msg := cnirequest.ErrorMessage(cause)
	if terr != nil {
		msg += fmt.Sprintf(" (and tearing down the attachments made before it failed: %v; the runtime's DEL retries what is left)", terr)
	}
	e.warn(p, errors.New(msg))
	e.claimsFailed(p, msg)
	var te *types.Error
	if errors.As(cause, &te) {
		return types.NewError(te.Code, msg, te.Details)
	}
	return types.NewError(types.ErrInternal, msg, "")
}

// warn posts the Warning Event of a failed ADD on the plan's pod.
func (e *Engine) warn(p *plan, err error) {
	if p == nil || p.pod == nil {
		return
	}
	e.warningEvent(p.pod, kube.ReasonAttachFailed, "%s", cnirequest.ErrorMessage(err))
}

// networkStatus builds the pod's network-status list (spec §5) from the
// results, default network first. routedVia are the gateways setDefaultRoute
// installed for the "default-route" attachment (nil when none was chosen).
//
// An optional value that cannot be published (a nameserver that is not an
// IP address, a "mac" that is not a hardware address or has no interface
// name, a negative "mtu", a device-info file that cannot be read or used;
// status.FromResultWithOmissions) is left out
// of its entry and named in a Warning Event on the pod: the attachments are
// made, and network-status only reports them (§5).
func (e *Engine) networkStatus(p *plan, results []types.Result, routedVia []string) ([]status.NetworkStatus, error) {
	list := make([]status.NetworkStatus, 0, len(results))
	for i, a := range p.attachments {
		if p.isAuxiliary(i) {
			continue // not a network of the pod (§5 lists its attachments)
		}
		opts := status.Options{
			Default:      i == 0,
			DefaultRoute: i == p.gateway,
		}
		if i > 0 && i == p.gateway {
			// The gateways the pod's default routes now use: the element's,
			// or for "default-route": [] the result's (§5.3.7.4).
			opts.GatewayRequest = routedVia
		}
		s, err := e.statusEntry(p.pod, &a, results[i], p.deviceInfoFiles[i], opts)
		if err != nil {
			return nil, err
		}
		list = append(list, s)
	}
	return list, nil
}

// statusEntry is the network-status entry (spec §5) of attachment a with
// result res, opts completed with the device-info of deviceInfoFile ("" or a
// missing file: none, device-info spec §5.1.2). An optional value that
// cannot be published is left out and named in a NetworkValueIgnored
// Warning Event on pod. Errors: the result cannot be converted.
func (e *Engine) statusEntry(pod *corev1.Pod, a *netconf.Attachment, res types.Result, deviceInfoFile string, opts status.Options) (status.NetworkStatus, error) {
	if deviceInfoFile != "" {
		d, err := devinfo.ReadFileRaw(deviceInfoFile)
		switch {
		case err == nil:
			opts.DeviceInfo = d
		case !errors.Is(err, fs.ErrNotExist):
			e.omitted(pod, a.NetworkKey, `"device-info"`, err.Error())
		}
	}
	s, omitted, err := status.FromResultWithOmissions(res, a.NetworkKey, a.IfName, opts)
	if err != nil {
		return s, fmt.Errorf("network %s: network-status: %w", a.NetworkKey, err)
	}
	for _, o := range omitted {
		e.omitted(pod, a.NetworkKey, fmt.Sprintf("%q", o.Field), o.Reason)
	}
	return s, nil
}

// omitted posts the Warning Event for an optional value (field, quoted) of
// network that network-status leaves out.
func (e *Engine) omitted(pod *corev1.Pod, network, field, reason string) {
	e.warningEvent(pod, kube.ReasonValueIgnored, "network %s: network-status %s left out: %s", network, field, reason)
}

// delegateError names the command, network, interface and plugin of a
// failed delegate, keeping the delegate's CNI error code.
func delegateError(cmd, network, ifName string, list *libcni.NetworkConfigList, err error) error {
	msg := fmt.Sprintf("network %s (interface %s, plugin %s): %s: %s", network, ifName, pluginTypes(list), cmd, cnirequest.ErrorMessage(err))
	var te *types.Error
	if errors.As(err, &te) {
		return types.NewError(te.Code, msg, te.Details)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return types.NewError(types.ErrTryAgainLater, msg+" (delegate timed out)", "")
	}
	return types.NewError(types.ErrInternal, msg, "")
}

// pluginTypes lists a config list's plugin types, "bridge+portmap".
func pluginTypes(list *libcni.NetworkConfigList) string {
	if list == nil {
		return "?"
	}
	t := make([]string, 0, len(list.Plugins))
	for _, p := range list.Plugins {
		t = append(t, p.Network.Type)
	}
	return strings.Join(t, "+")
}

func (e *Engine) observe(cmd string, list *libcni.NetworkConfigList, start time.Time, err error) {
	if e.opts.Observer == nil {
		return
	}
	plugin := "?"
	if list != nil && len(list.Plugins) > 0 {
		plugin = list.Plugins[0].Network.Type
	}
	e.opts.Observer.DelegateDone(cmd, plugin, time.Since(start), err)
}

func (e *Engine) normalEvent(pod *corev1.Pod, reason, format string, args ...any) {
	if e.opts.Events != nil && pod != nil {
		e.opts.Events.Normal(pod, reason, format, args...)
	}
}

// warnUndeclared posts the Warning Event of each attachment whose keys
// were handed over without a declaring plugin (undeclaredCapabilities:
// multus).
func (e *Engine) warnUndeclared(pod *corev1.Pod, uses ...podnetworks.UndeclaredUse) {
	for _, u := range uses {
		e.warningEvent(pod, kube.ReasonUndeclaredCapability, "%s", u.Message())
	}
}

func (e *Engine) warningEvent(pod *corev1.Pod, reason, format string, args ...any) {
	if e.opts.Events != nil && pod != nil {
		e.opts.Events.Warning(pod, reason, format, args...)
	}
}
