package attach

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"k8s.io/klog/v2"

	"github.com/multinet/multinet/internal/node/cnirequest"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/pkg/spec/devinfo"
	"github.com/multinet/multinet/pkg/spec/netconf"
)

// fallbackPlanTimeout bounds the API lookups of a DEL without a record.
const fallbackPlanTimeout = 3 * time.Second

// Del performs CNI DEL for one pod sandbox from its attachment record: every
// recorded attachment in reverse order, continuing past failures, with one
// aggregated error (spec §7.2). It needs neither the API server nor the NADs.
// CNI_NETNS may be empty or already gone: every delegate's DEL still runs
// (with an empty CNI_NETNS) so that IPAM releases its addresses.
//
// Without a record, it tears down what the API server still knows: the
// pod's current selection, else the default network alone. With a corrupt
// record it tears down what the record's readable part, libcni's cache and
// the API server name (salvage.go), reports it in the log, an Event and a
// metric, and fails while something may be left (a delegate DEL failed, or
// the API server cannot give the pod's networks). The record is removed once
// every delegate DEL succeeded; otherwise it is kept for the runtime's retry.
func (e *Engine) Del(ctx context.Context, req *cnirequest.Request) error {
	unlock, err := e.locks.Lock(ctx, req.ContainerID)
	if err != nil {
		return types.NewError(types.ErrTryAgainLater, err.Error(), "")
	}
	defer unlock()

	log := klog.FromContext(ctx).WithValues("containerID", req.ContainerID)
	rec, err := e.opts.Store.Load(req.ContainerID)
	switch {
	case errors.Is(err, state.ErrCorrupt), err == nil && rec.Partial:
		// What the record, libcni's cache and the API server still name
		// (salvage.go); what is left stays in the record for the retry.
		s := e.salvage(ctx, req.CNIPath, req.ContainerID, req, rec, err)
		if err := e.tearDownSalvaged(ctx, "DEL", req.CNIPath, req.Netns, s); err != nil {
			return err
		}
		if err := releasePolicy(ctx, e.opts.NetworkPolicy, req.ContainerID, req.Netns); err != nil {
			return types.NewError(types.ErrTryAgainLater, err.Error(), "")
		}
		if err := e.opts.Store.Delete(req.ContainerID); err != nil {
			return types.NewError(types.ErrIOFailure, fmt.Sprintf("remove attachment record: %v", err), "")
		}
		return nil
	case err == nil:
	case errors.Is(err, state.ErrNotFound):
		rec, err = e.fallbackRecord(ctx, req)
		if err != nil {
			return types.NewError(types.ErrTryAgainLater, fmt.Sprintf("DEL of container %s without a record: %v", req.ContainerID, err), "")
		}
	default:
		return types.NewError(types.ErrIOFailure, fmt.Sprintf("read attachment record: %v", err), "")
	}

	e.withdrawStatus(req.ContainerID, rec) // not to be published any more
	n := len(rec.Attachments)
	if err := e.teardown(ctx, req.CNIPath, req.Netns, rec, n); err != nil {
		if serr := e.opts.Store.Save(rec); serr != nil {
			log.Error(serr, "save the attachments left after a failed DEL")
		}
		log.Error(err, "DEL failed; keeping the record for the runtime's retry")
		return types.NewError(types.ErrTryAgainLater, err.Error(), "")
	}
	if err := releasePolicy(ctx, e.opts.NetworkPolicy, req.ContainerID, req.Netns); err != nil {
		if serr := e.opts.Store.Save(rec); serr != nil { // no attachments left
			log.Error(serr, "save the record after a failed DEL")
		}
		return types.NewError(types.ErrTryAgainLater, err.Error(), "")
	}
	if err := e.opts.Store.Delete(req.ContainerID); err != nil {
		return types.NewError(types.ErrIOFailure, fmt.Sprintf("remove attachment record: %v", err), "")
	}
	e.sandboxRemoved(req.ContainerID)
	log.V(1).Info("DEL done", "attachments", n)
	return nil
}

// teardown runs the delegate DEL of rec.Attachments[:n] in reverse order and
// removes their device-info files, continuing past failures. It returns the
// failures joined; the record's failed attachments are kept in rec (the
// others removed) so that a retry does only what is left. cniPath is the
// request's CNI_PATH, where the delegates are unless Options.BinDirs is set.
// When ctx has a deadline, each attachment's DEL gets at most its share of
// the time left (and DelegateTimeout), so that one delegate that does not
// answer cannot use the time of the others (spec §7.2: "the failure of one
// shall not prevent teardown of subsequent attachments").
func (e *Engine) teardown(ctx context.Context, cniPath, netns string, rec *state.Record, n int) error {
	if n == 0 {
		return nil // an ADD that attempted nothing (failUnattempted)
	}
	if netns != "" {
		if _, err := os.Stat(netns); err != nil {
			netns = "" // gone with the sandbox: delegates still release IPAM
		}
	}
	args, err := parseArgs(rec.CNIArgs)
	if err != nil {
		return fmt.Errorf("record of container %s: %w", rec.ContainerID, err)
	}
	cni := e.cniFor(cniPath)
	var errs []error
	var kept []state.Attachment
	for i := n - 1; i >= 0; i-- {
		a := rec.Attachments[i]
		if err := e.delOne(ctx, cni, rec.ContainerID, netns, args, &a, i+1); err != nil {
			errs = append(errs, err)
			kept = append([]state.Attachment{a}, kept...)
			continue
		}
		if a.DeviceInfoFile != "" {
			if err := devinfo.RemoveFile(a.DeviceInfoFile); err != nil {
				errs = append(errs, fmt.Errorf("network %s: remove device-info file: %w", a.Network, err))
			}
		}
		e.clearClaim(ctx, &a)
	}
	rec.Attachments = append(kept, rec.Attachments[n:]...)
	return errors.Join(errs...)
}

// delOne runs the delegate DEL of one recorded attachment, the first of left
// attachments still to tear down within ctx.
func (e *Engine) delOne(ctx context.Context, cni *libcni.CNIConfig, containerID, netns string, args podArgs, a *state.Attachment, left int) error {
	list, err := libcni.ConfListFromBytes(a.ConfList)
	if err != nil {
		return fmt.Errorf("network %s (interface %s): recorded config: %w", a.Network, a.IfName, err)
	}
	rt := &libcni.RuntimeConf{
		ContainerID:    containerID,
		NetNS:          netns,
		IfName:         a.IfName,
		Args:           slices.Concat(args.Pairs, a.CNIArgs),
		CapabilityArgs: a.CapabilityArgs,
	}
	timeout, what := e.opts.DelegateTimeout, "delegateTimeout"
	if dl, ok := ctx.Deadline(); ok && left > 1 {
		if share := time.Until(dl) / time.Duration(left); share < timeout {
			timeout, what = max(share, 0), fmt.Sprintf("its share of the time left to tear down %d attachments", left)
		}
	}
	ctx, cancel := delegateContext(ctx, timeout, what)
	defer cancel()
	start := time.Now()
	err = cni.DelNetworkList(ctx, list, rt)
	e.observe("DEL", list, start, err)
	if err != nil {
		return delegateErr("DEL", a.Network, a.IfName, list, ctx, err)
	}
	return nil
}

// fallbackRecord rebuilds the attachments of a container without a usable
// record from the API (the pod's selection as it is now), or the default
// network alone when the pod or the API server is gone.
func (e *Engine) fallbackRecord(ctx context.Context, req *cnirequest.Request) (*state.Record, error) {
	if req.ArgsErr != nil {
		return nil, req.ArgsErr
	}
	args, runtimeConfig := req.Args, req.RuntimeConfig
	rec := &state.Record{ContainerID: req.ContainerID, Netns: req.Netns, CNIArgs: req.RawArgs,
		PodNamespace: args.Namespace, PodName: args.Name, PodUID: args.UID}

	pctx, cancel := context.WithTimeout(ctx, fallbackPlanTimeout)
	defer cancel()
	p, err := e.planner.plan(pctx, req.IfName, req.ContainerID, args, runtimeConfig, false)
	if err != nil {
		// The pod or a NAD is gone, or the API server is not answering:
		// the default network is all that can be known.
		def, derr := e.planner.defaultAttachment(nil, req.IfName, runtimeConfig)
		if derr != nil {
			return nil, fmt.Errorf("%v; and the default network: %w", err, derr)
		}
		p = &plan{attachments: []netconf.Attachment{def}, deviceInfoFiles: []string{""}}
	}
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
		rec.Attachments = append(rec.Attachments, state.Attachment{
			Network: a.NetworkKey, Default: i == 0, Auxiliary: p.isAuxiliary(i), IfName: a.IfName,
			ConfList: a.ConfList.Bytes, CapabilityArgs: a.CapabilityArgs, CNIArgs: a.CNIArgs,
			Phase: state.PhasePlanned, DeviceInfoFile: f,
		})
	}
	return rec, nil
}

// Check performs CNI CHECK: every recorded attachment's delegates are
// checked against the result libcni cached at ADD (not only the default
// network); attachments whose cniVersion is below 0.4.0 are skipped (CNI
// spec: CHECK came with 0.4.0). Errors name the network and plugin; a
// container without a complete record is an error.
func (e *Engine) Check(ctx context.Context, req *cnirequest.Request) error {
	unlock, err := e.locks.Lock(ctx, req.ContainerID)
	if err != nil {
		return types.NewError(types.ErrTryAgainLater, err.Error(), "")
	}
	defer unlock()
	rec, err := e.opts.Store.Load(req.ContainerID)
	if err != nil {
		return types.NewError(types.ErrIOFailure, fmt.Sprintf("CHECK of container %s: %v", req.ContainerID, err), "")
	}
	if !rec.Complete {
		return types.NewError(types.ErrInternal, fmt.Sprintf("CHECK of container %s: its ADD did not complete", req.ContainerID), "")
	}
	args, err := parseArgs(rec.CNIArgs)
	if err != nil {
		return types.NewError(types.ErrInvalidEnvironmentVariables, err.Error(), "")
	}
	cni := e.cniFor(req.CNIPath)
	var errs []error
	for _, a := range rec.Attachments {
		list, err := libcni.ConfListFromBytes(a.ConfList)
		if err != nil {
			errs = append(errs, fmt.Errorf("network %s: recorded config: %w", a.Network, err))
			continue
		}
		rt := &libcni.RuntimeConf{ContainerID: req.ContainerID, NetNS: req.Netns, IfName: a.IfName, Args: slices.Concat(args.Pairs, a.CNIArgs, [][2]string{cnirequest.NetworkNamespaceArg(a.Network)}), CapabilityArgs: a.CapabilityArgs}
		if err := e.checkOne(ctx, cni, list, rt); err != nil {
			errs = append(errs, delegateError("CHECK", a.Network, a.IfName, list, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return types.NewError(types.ErrInternal, err.Error(), "")
	}
	return nil
}

// checkOne runs the delegate CHECK of one recorded attachment with the
// delegate timeout. A config list below CNI 0.4.0 is skipped: CHECK came
// with CNI spec 0.4.0, its plugins do not know it, and libcni refuses it
// with ErrorCheckNotSupp (docs/decisions/attach.md "CHECK"). Errors: the
// delegate's, as libcni returns them.
func (e *Engine) checkOne(ctx context.Context, cni *libcni.CNIConfig, list *libcni.NetworkConfigList, rt *libcni.RuntimeConf) error {
	ctx, cancel := context.WithTimeout(ctx, e.opts.DelegateTimeout)
	defer cancel()
	start := time.Now()
	err := cni.CheckNetworkList(ctx, list, rt)
	if errors.Is(err, libcni.ErrorCheckNotSupp) {
		klog.FromContext(ctx).V(2).Info("CHECK skipped: the delegate's cniVersion predates CHECK", "network", list.Name, "cniVersion", list.CNIVersion, "ifName", rt.IfName)
		return nil
	}
	e.observe("CHECK", list, start, err)
	return err
}

// GC performs CNI GC: the records of containers that are not in the
// runtime's cni.dev/valid-attachments are torn down (as DEL with no netns)
// and removed; then every delegate network in use gets GC with the
// attachments it still serves, so that libcni DELs its stale cached
// attachments and 1.1.0 plugins release what is not valid.
func (e *Engine) GC(ctx context.Context, req *cnirequest.Request) error {
	if req.Invalid != nil { // cni.dev/valid-attachments is malformed
		return req.Invalid
	}
	valid := map[string]bool{}
	for _, a := range req.ValidAttachments {
		valid[a.ContainerID] = true
	}
	ids, err := e.opts.Store.List()
	if err != nil {
		return types.NewError(types.ErrIOFailure, fmt.Sprintf("GC: list records: %v", err), "")
	}
	var errs []error
	networks := map[string]*gcNetwork{}
	unknown := false
	for _, id := range ids {
		if err := e.gcOne(ctx, req.CNIPath, id, valid[id], networks); err != nil {
			errs = append(errs, err)
			unknown = unknown || valid[id]
		}
	}
	if unknown {
		// A valid container's attachments are unknown: the delegates' GC
		// would DEL them as stale (libcni DELs every cached attachment not
		// listed). Skip it until the record can be read.
		errs = append(errs, errors.New("GC: delegate GC skipped: the attachments of a valid container are unknown"))
		return types.NewError(types.ErrInternal, errors.Join(errs...).Error(), "")
	}
	if list, _, err := e.opts.DefaultNetwork(); err == nil {
		if _, ok := networks[list.Name]; !ok {
			networks[list.Name] = &gcNetwork{list: list}
		}
	}
	// Every network multinetd has attached on the node, so that the
	// attachments of containers whose record is lost or corrupt are
	// reclaimed too (networks.go); one no live record uses is forgotten
	// once its GC succeeded.
	log := klog.FromContext(ctx)
	idle := map[string]bool{}
	for name, list := range e.rememberedNetworks(log) {
		if _, ok := networks[name]; !ok {
			networks[name] = &gcNetwork{list: list}
			idle[name] = true
		}
	}
	cni := e.cniFor(req.CNIPath)
	protectValid(log, cni, valid, networks)
	for _, n := range networks {
		gctx, cancel := context.WithTimeout(ctx, e.opts.DelegateTimeout)
		start := time.Now()
		err := cni.GCNetworkList(gctx, n.list, &libcni.GCArgs{ValidAttachments: n.valid})
		cancel()
		e.observe("GC", n.list, start, err)
		if err != nil {
			errs = append(errs, fmt.Errorf("GC of network %s: %w", n.list.Name, err))
		} else if idle[n.list.Name] {
			e.forgetNetwork(log, n.list.Name)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return types.NewError(types.ErrInternal, err.Error(), "")
	}
	return nil
}

// gcNetwork is one delegate network seen by GC and the attachments of it
// that are still valid.
type gcNetwork struct {
	list  *libcni.NetworkConfigList
	valid []types.GCAttachment
}

// gcOne tears down the record of container id when it is not valid (as a DEL
// without netns), else adds its attachments to the valid attachments of their
// networks.
func (e *Engine) gcOne(ctx context.Context, cniPath, id string, valid bool, networks map[string]*gcNetwork) error {
	unlock, err := e.locks.Lock(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	rec, err := e.opts.Store.Load(id)
	if errors.Is(err, state.ErrNotFound) {
		return nil
	}
	if !valid {
		return e.reclaim(ctx, "GC", cniPath, id, rec, err)
	}
	if err != nil {
		return fmt.Errorf("GC: record of container %s: %w", id, err)
	}
	for _, a := range rec.Attachments {
		list, err := libcni.ConfListFromBytes(a.ConfList)
		if err != nil {
			continue
		}
		n, ok := networks[list.Name]
		if !ok {
			n = &gcNetwork{list: list}
			networks[list.Name] = n
		}
		n.valid = append(n.valid, types.GCAttachment{ContainerID: id, IfName: a.IfName})
	}
	return nil
}

// reclaim tears down the attachments of container id, which the runtime no
// longer has, as a DEL without netns, and removes its record: rec as loaded,
// or, when loadErr says the record is corrupt, what its readable part and
// libcni's cache name (the networks' GC reclaims the rest). op names the
// operation in errors ("GC", "reap"). A record that failed to load otherwise
// is an error and stays.
func (e *Engine) reclaim(ctx context.Context, op, cniPath, id string, rec *state.Record, loadErr error) error {
	if loadErr != nil {
		if !errors.Is(loadErr, state.ErrCorrupt) {
			return fmt.Errorf("%s: record of container %s: %w", op, id, loadErr)
		}
		s := e.salvage(ctx, cniPath, id, nil, nil, loadErr)
		s.whole = true
		if err := e.tearDownSalvaged(ctx, op, cniPath, "", s); err != nil {
			return fmt.Errorf("%s: container %s: %w", op, id, err)
		}
		if err := releasePolicy(ctx, e.opts.NetworkPolicy, id, ""); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		return e.opts.Store.Delete(id)
	}
	e.withdrawStatus(id, rec)
	if err := e.teardown(ctx, cniPath, "", rec, len(rec.Attachments)); err != nil {
		if serr := e.opts.Store.Save(rec); serr != nil {
			err = errors.Join(err, serr)
		}
		return fmt.Errorf("%s: container %s: %w", op, id, err)
	}
	if err := releasePolicy(ctx, e.opts.NetworkPolicy, id, ""); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	e.sandboxRemoved(id)
	return e.opts.Store.Delete(id)
}

// Status performs CNI STATUS (CNI spec 1.1): not ready (code 50) until
// the default network's config is present and ready reports true (the
// daemon's informers have synced); then the default network's own STATUS.
func (e *Engine) Status(ctx context.Context, req *cnirequest.Request) error {
	// Ready first: a default network from a NAD is read through the NAD
	// informer, which waits for its first list.
	if e.opts.Ready != nil {
		if err := e.opts.Ready(); err != nil {
			return types.NewError(50, fmt.Sprintf("multinetd not ready: %v", err), "")
		}
	}
	list, name, err := e.opts.DefaultNetwork()
	if err != nil {
		return types.NewError(50, fmt.Sprintf("default network not available: %v", err), "")
	}
	cni := e.cniFor(req.CNIPath)
	sctx, cancel := context.WithTimeout(ctx, e.opts.DelegateTimeout)
	defer cancel()
	start := time.Now()
	err = cni.GetStatusNetworkList(sctx, list)
	e.observe("STATUS", list, start, err)
	if err != nil {
		var te *types.Error
		if errors.As(err, &te) {
			return types.NewError(te.Code, fmt.Sprintf("default network %s: %s", name, te.Msg), te.Details)
		}
		return types.NewError(50, fmt.Sprintf("default network %s: %v", name, err), "")
	}
	return nil
}
