package attach

import (
	"context"
	"errors"

	"github.com/containernetworking/cni/pkg/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/multinet/multinet/internal/node/cnirequest"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/pkg/spec/netconf"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
	"github.com/multinet/multinet/pkg/spec/selection"
	"github.com/multinet/multinet/pkg/spec/status"
)

// SandboxWatcher is told which sandbox each pod has (hotplug.Sandboxes):
// Attached after an ADD saved its final record, Removed after a DEL or GC
// removed a record.
type SandboxWatcher interface {
	Attached(rec *state.Record)
	Removed(containerID string)
}

// HotPlugPort is the engine as hot-plug (internal/node/hotplug) uses it: the
// planner's answers for elements added to a running sandbox and the
// delegate ADD and DEL of one attachment. It implements hotplug.Engine;
// the engine's own surface stays the CNI verbs.
type HotPlugPort struct{ e *Engine }

// HotPlugPort returns the engine's port for hot-plug.
func (e *Engine) HotPlugPort() *HotPlugPort { return &HotPlugPort{e: e} }

// CNIPath is recorded, else the last request's CNI_PATH. Errors: neither is
// known and the engine has no BinDirs.
func (hp *HotPlugPort) CNIPath(recorded string) (string, error) {
	path := recorded
	if path == "" {
		path = hp.e.requestPath()
	}
	if path == "" && len(hp.e.opts.BinDirs) == 0 {
		return "", errors.New("no CNI_PATH known yet (the record has none and no CNI request has been served)")
	}
	return path, nil
}

// ParseSelectionElements parses a networks annotation with the engine's
// policy (podnetworks.Policy).
func (hp *HotPlugPort) ParseSelectionElements(networks, namespace string) ([]selection.Element, error) {
	return hp.e.opts.ParseSelectionElements(networks, namespace)
}

// Check is the planner's check of pod's selection (as ADD's).
func (hp *HotPlugPort) Check(ctx context.Context, pod *corev1.Pod, defaultIfName string) (*podnetworks.Verdict, error) {
	return hp.e.planner.check(ctx, pod, defaultIfName)
}

// IfNamesBeside is the planner's naming of elements added to rec's sandbox.
func (hp *HotPlugPort) IfNamesBeside(rec *state.Record, elems []selection.Element, defaultIfName string) ([]string, []error) {
	return hp.e.planner.ifNamesBeside(rec, elems, defaultIfName)
}

// Prepare checks a's plugins are in cniPath, prepares its device-info file
// and remembers its network for GC (as ADD does for each attachment).
func (hp *HotPlugPort) Prepare(cniPath, containerID string, a netconf.Attachment) (netconf.Attachment, string, error) {
	e := hp.e
	p := &plan{attachments: []netconf.Attachment{a}, resources: []string{""}, deviceIDs: []string{""}, deviceInfoFiles: []string{""}, elements: 1}
	if err := e.findPlugins(cniPath, p); err != nil {
		return a, "", err
	}
	if err := e.planner.prepareDeviceInfoFiles(containerID, p); err != nil {
		return a, "", err
	}
	e.rememberNetworks(klog.Background().WithValues("containerID", containerID), p)
	return p.attachments[0], p.deviceInfoFiles[0], nil
}

// AddAttachment runs the delegate ADD of a in req's sandbox (req.Args the
// recorded CNI_ARGS) with the delegate timeout.
func (hp *HotPlugPort) AddAttachment(ctx context.Context, req *cnirequest.Request, a *netconf.Attachment) (types.Result, error) {
	return hp.e.runAdd(ctx, hp.e.cniFor(req.CNIPath), a, req)
}

// DelAttachment runs the delegate DEL of a in req's sandbox within the
// delegate timeout and the teardown grace, also when ctx has ended.
func (hp *HotPlugPort) DelAttachment(ctx context.Context, req *cnirequest.Request, a *state.Attachment) error {
	e := hp.e
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opts.DelegateTimeout+e.opts.TeardownGrace)
	defer cancel()
	return e.delOne(tctx, e.cniFor(req.CNIPath), req.ContainerID, req.Netns, req.Args, a, 1)
}

// StatusEntry is a's network-status entry (as ADD's).
func (hp *HotPlugPort) StatusEntry(pod *corev1.Pod, a *netconf.Attachment, res types.Result, deviceInfoFile string) (status.NetworkStatus, error) {
	return hp.e.statusEntry(pod, a, res, deviceInfoFile, status.Options{})
}

// sandboxAttached and sandboxRemoved tell Options.Sandboxes.
func (e *Engine) sandboxAttached(rec *state.Record) {
	if e.opts.Sandboxes != nil {
		e.opts.Sandboxes.Attached(rec)
	}
}

func (e *Engine) sandboxRemoved(id string) {
	if e.opts.Sandboxes != nil {
		e.opts.Sandboxes.Removed(id)
	}
}
