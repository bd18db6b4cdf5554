// Package podnetworks decides whether a pod's network selection is valid
// (multi-net spec v1.3) against the NetworkAttachmentDefinitions it names,
// the namespace isolation policy (§7.4) and the default network, and plans
// the attachments it asks for. It is the one place of those rules:
// multinetd plans every ADD with Check, the admission webhook denies what
// Check finds, and kubectl multinet lint and explain report it. The pieces
// it puts together are pkg/spec/selection (the annotations, §4; isolation) and
// pkg/spec/netconf (the NAD's CNI config, §3.4; interface names, §4.1.2.1.5;
// capabilities and runtimeConfig, §4.1.2.1.x.2; args.cni, §4.1.2.1.6).
//
// Everything Check decides can be known without the node, except what
// Options.Configs reads from the node's CNI conf dir. What only the node
// knows (plugin binaries, devices, the delegates' own failures) is not
// checked here: multinetd fails the ADD for it (docs/validation.md).
//
// The package does no I/O of its own: NADs come from Options.NADs (only
// ReadNADTrustPolicy reads its file).
package podnetworks

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/containernetworking/cni/libcni"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	psapi "k8s.io/pod-security-admission/api"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/pkg/spec/netconf"
	"github.com/multinet/multinet/pkg/spec/selection"
)

// DefaultIfName is the CNI_IFNAME container runtimes give the cluster-wide
// default network (spec §6), which Options.DefaultIfName defaults to.
const DefaultIfName = "eth0"

// DefaultResourceNameKeys are the NAD annotations naming a device resource,
// first present wins: the NPWG key, then the spelling of the cni-dp
// proposal (spec 001).
var DefaultResourceNameKeys = []string{nadv1.ResourceNameAnnotation, nadv1.LegacyResourceNameAnnotation}

// MaxMissingLookups is how many distinct missing NetworkAttachmentDefinitions
// Check looks up before it stops: each miss may cost a live GET, and one
// missing NAD already makes the selection invalid.
const MaxMissingLookups = 8

// NADs reads NetworkAttachmentDefinitions. Get returns an error for which
// apierrors.IsNotFound is true when the NAD does not exist, a
// *NotKnownError when the source cannot know (lint), and any other error
// when the lookup failed (Check then returns a *LookupError). The object is
// not modified.
type NADs interface {
	Get(ctx context.Context, namespace, name string) (*nadv1.NetworkAttachmentDefinition, error)
}

// Configs resolves a NAD's CNI config list (spec §3.4.1), the on-disk
// rules included: *netconf.Resolver.
type Configs interface {
	Resolve(nadNamespace, nadName, specConfig string) (*libcni.NetworkConfigList, error)
}

// Policy is the part of multinetd's configuration that decides a pod's
// networks besides its own annotations. The webhook, lint and explain take
// the same settings so that their verdicts are multinetd's.
type Policy struct {
	// Isolation restricts which namespaces' NADs a pod may select (spec
	// §7.4; multinetd's namespaceIsolation, globalNamespaces). It does not
	// apply to DefaultNetworks.
	Isolation selection.IsolationPolicy
	// DefaultNetworks are attached to every pod after the default network
	// and before its own networks, on generated interfaces net1, net2, …
	// (multinetd's defaultNetworks, Multus's); only Namespace and Name are
	// read.
	DefaultNetworks []selection.Element
	// SystemNamespaces are namespaces whose pods do not get DefaultNetworks
	// (multinetd's systemNamespaces).
	SystemNamespaces []string
	// UndeclaredCapabilities decides a key whose capability no plugin of
	// the NAD declares (multinetd's undeclaredCapabilities): "" and
	// RefuseUndeclared refuse it (the spec), MultusUndeclared hands it over
	// as Multus does and lists it in Attachment.Undeclared.
	UndeclaredCapabilities UndeclaredCapabilities
	// MaxSelectionElements bounds the network selection elements of a
	// pod's networks annotation (multinetd's maxSelectionElements, the
	// webhook's --max-selection-elements); 0 is
	// DefaultMaxSelectionElements. More are refused before any is decoded.
	MaxSelectionElements int
	// NADTrust is the NAD trust policy (docs/nad-trust.md): the plugin
	// types and host-reaching keys the NADs of each namespace may carry.
	// Check refuses an attachment to a NAD that breaks it; its zero value
	// enforces nothing.
	NADTrust NADTrust
}

// DefaultMaxSelectionElements is Policy.MaxSelectionElements when unset:
// far above what a pod uses (a multi-homed CNF has a handful; every
// attachment is a delegate run, a link and addresses on the node), far
// below what would let one pod tie up a node's multinetd.
const DefaultMaxSelectionElements = 32

// MaxElements is p.MaxSelectionElements, or DefaultMaxSelectionElements
// when it is 0.
func (p Policy) MaxElements() int {
	if p.MaxSelectionElements > 0 {
		return p.MaxSelectionElements
	}
	return DefaultMaxSelectionElements
}

// ParseSelectionElements parses a pod's networks annotation
// (selection.ParseLimit) with the bound of the policy: more than
// MaxElements elements are refused, counted before any is decoded, with an
// error naming the setting.
func (p Policy) ParseSelectionElements(annotation, podNamespace string) ([]selection.Element, error) {
	elems, err := selection.ParseLimit(annotation, podNamespace, p.MaxElements())
	var tm *selection.TooManyElementsError
	if errors.As(err, &tm) {
		return nil, fmt.Errorf("%w (multinetd's maxSelectionElements, the webhook's --max-selection-elements)", err)
	}
	return elems, err
}

// DefaultNetworksFor returns the networks of DefaultNetworks a pod of
// namespace gets: none in SystemNamespaces, or for a request that names no
// pod (namespace "").
func (p Policy) DefaultNetworksFor(namespace string) []selection.Element {
	if namespace == "" || slices.Contains(p.SystemNamespaces, namespace) {
		return nil
	}
	return p.DefaultNetworks
}

// Options configure Check.
type Options struct {
	Policy
	// NADs reads the selected NetworkAttachmentDefinitions. Required.
	NADs NADs
	// Configs resolves a NAD's config list. Nil: spec.config only
	// (netconf.Resolve without a directory); a NAD without spec.config then
	// uses the node's CNI config, which is not checked (a note says so).
	Configs Configs
	// ResourceNameKeys are the NAD annotations naming a device resource,
	// first present wins; nil means DefaultResourceNameKeys.
	ResourceNameKeys []string
	// DefaultIfName is the default network's CNI_IFNAME; empty means
	// DefaultIfName.
	DefaultIfName string
}

// Pod is what Check reads of a pod (or a pod template).
type Pod struct {
	// Namespace defaults the element namespaces (§4.1.2.1.2) and is the
	// pod's namespace for isolation.
	Namespace string
	// Annotations hold selection.NetworksAnnotation and
	// selection.DefaultNetworkAnnotation.
	Annotations map[string]string
	// HostNetwork: the pod uses the node's network namespace, so no CNI
	// plugin runs for it.
	HostNetwork bool
}

// ConfigSource says where an attachment's config list comes from.
type ConfigSource string

const (
	// ConfigSpec: the NAD's spec.config (§3.4.1 rule 1).
	ConfigSpec ConfigSource = "spec.config"
	// ConfigNode: the node's CNI conf dir, read through Options.Configs
	// (§3.4.1 rules 2 and 3).
	ConfigNode ConfigSource = "node"
	// ConfigUnknown: the config is not visible (no spec.config and no
	// Options.Configs, or a NAD the source does not know): the attachment
	// is planned with a stand-in that declares every capability, so only
	// what does not depend on the config is checked.
	ConfigUnknown ConfigSource = "unknown"
)

// Attachment is one planned attachment of a Verdict.
type Attachment struct {
	// Attachment is the plan: Index (-1 for the override and
	// defaultNetworks), NetworkKey, IfName, and, when Planned, the ConfList
	// (args.cni merged) and CapabilityArgs to run with.
	netconf.Attachment
	// NAD is the NetworkAttachmentDefinition; nil when it was not found,
	// not known, or not looked up (isolation forbids it).
	NAD *nadv1.NetworkAttachmentDefinition
	// Resource is the NAD's device resource name, "" when none.
	Resource string
	// Device is the attachment's ordinal among the device-plugin
	// attachments of Resource (1 for the first), the device of the pod's
	// allocation it gets; 0 when Resource is "" or the device comes through
	// DRA (ClaimTemplate).
	Device int64
	// ClaimTemplate is the ResourceClaimTemplate the NAD names
	// (ResourceClaimTemplateAnnotation): the device comes through DRA, from
	// the pod's resource claim Claim. "" for device-plugin and device-less
	// networks.
	ClaimTemplate string
	// Claim is the name of the pod's resource claim (spec.resourceClaims)
	// that holds the attachment's device: ClaimNamePrefix + its ordinal
	// among the pod's DRA attachments. "" when ClaimTemplate is.
	Claim string
	// Config says where the config list comes from; "" when there is none
	// (the NAD is missing, forbidden or unusable).
	Config ConfigSource
	// Planned: the attachment was planned without a problem.
	Planned bool
	// Note says what was not checked about it (its NAD is not known, its
	// config lives on the node); also in Verdict.Notes.
	Note string
}

// Verdict is what Check decided about a pod's network selection.
type Verdict struct {
	// Elements are the network selection elements of the networks
	// annotation (selection.Parse); nil when it is absent or does not parse.
	Elements []selection.Element
	// DefaultNetwork is the default-network override planned on the default
	// network's interface; nil when the pod has none or it does not parse.
	DefaultNetwork *Attachment
	// DefaultNetworks are multinetd's defaultNetworks this pod gets, on
	// net1, net2, …, in order.
	DefaultNetworks []Attachment
	// Attachments has one entry per element of Elements, in order, with the
	// interface name each gets.
	Attachments []Attachment
	// Problems make the selection invalid; empty when it is valid.
	Problems []Problem
	// Notes say what could not be checked (a NAD the source does not know,
	// a config that lives on the node), each starting with the field path.
	Notes []string
}

// Err returns the *Error listing Problems, nil when there are none.
func (v *Verdict) Err() error {
	if len(v.Problems) == 0 {
		return nil
	}
	return &Error{Problems: v.Problems}
}

// Check decides the network selection of pod (multi-net spec v1.3):
//
//   - both annotations parse (selection.Parse, selection.ParseDefaultNetwork:
//     every key of §4.1.2.1, unique interfaces, one "default-route", "ips"
//     without "ipam-claim-reference" §4.1.2.1.11);
//   - a pod with HostNetwork selects nothing;
//   - Options.Isolation allows each selected NAD, the override included
//     (§7.4), checked before any lookup so that the answer does not depend
//     on whether a forbidden NAD exists;
//   - each selected NAD exists, its resource name annotation is an extended
//     resource name (spec 002), and its config resolves (§3.4.1, a supported
//     cniVersion);
//   - interface names: requested ones do not collide with the default
//     network's (Options.DefaultIfName) or DefaultNetworks' (§4.1.2.1.5);
//   - each requested runtimeConfig key (ips, mac, portMappings, bandwidth,
//     infiniband-guid) has a capable plugin, and cni-args merge
//     (§4.1.2.1.x.2, §4.1.2.1.6.2; netconf.PlanAttachment), unless
//     Policy.UndeclaredCapabilities is MultusUndeclared: then such a key is
//     handed over as Multus does (Verdict.Undeclared lists them either way);
//   - DefaultNetworks exist, resolve and are not device networks.
//
// Every problem is found, not only the first; each NAD is looked up once,
// and after MaxMissingLookups missing ones no further NAD is. Errors: a
// *LookupError when a lookup failed otherwise than NotFound (the verdict so
// far is returned with it); everything else is in the Verdict.
func Check(ctx context.Context, pod Pod, opts Options) (*Verdict, error) {
	if opts.NADs == nil {
		return nil, errors.New("podnetworks: Options.NADs is required")
	}
	if opts.DefaultIfName == "" {
		opts.DefaultIfName = DefaultIfName
	}
	if opts.ResourceNameKeys == nil {
		opts.ResourceNameKeys = DefaultResourceNameKeys
	}
	c := &checker{ctx: ctx, pod: pod, opts: opts, v: &Verdict{}, nads: map[string]*nadResult{}}
	err := c.run()
	slices.SortStableFunc(c.v.Problems, func(a, b Problem) int {
		if d := cmp.Compare(fieldRank(a), fieldRank(b)); d != 0 {
			return d
		}
		return cmp.Compare(a.Index, b.Index)
	})
	return c.v, err
}

// fieldRank orders problems: the networks annotation, the override, the pod
// spec, multinetd's defaultNetworks.
func fieldRank(p Problem) int {
	switch p.Annotation {
	case selection.NetworksAnnotation:
		return 0
	case selection.DefaultNetworkAnnotation:
		return 1
	}
	if p.Field == HostNetworkField {
		return 2
	}
	return 3
}

// checker holds one Check call.
type checker struct {
	ctx  context.Context
	pod  Pod
	opts Options
	v    *Verdict
	// nads memoizes the lookups by "namespace/name".
	nads    map[string]*nadResult
	missing int // distinct NADs found missing
	// hostPortLevel is the Pod Security level of the pod's namespace when
	// it forbids hostPort and the pod asks for portMappings; "" otherwise.
	hostPortLevel psapi.Level
}

// nadResult is what Check learnt about one NAD.
type nadResult struct {
	nad      *nadv1.NetworkAttachmentDefinition
	list     *libcni.NetworkConfigList
	source   ConfigSource
	resource string
	// claimTemplate is the NAD's ResourceClaimTemplate, "" when none.
	claimTemplate string
	// problem makes every attachment to the NAD fail; section is its spec
	// section ("" when none applies).
	problem, section string
	// note says what was not checked.
	note string
}

func (c *checker) run() error {
	v, ns := c.v, c.pod.Namespace
	var override *selection.Element
	if raw, ok := c.pod.Annotations[selection.DefaultNetworkAnnotation]; ok {
		el, err := selection.ParseDefaultNetwork(raw, ns)
		if err != nil {
			c.parseProblems(selection.DefaultNetworkAnnotation, err)
		} else {
			override = el
		}
	}
	if raw, ok := c.pod.Annotations[selection.NetworksAnnotation]; ok {
		elems, err := c.opts.ParseSelectionElements(raw, ns)
		if err != nil {
			c.parseProblems(selection.NetworksAnnotation, err)
		}
		v.Elements = elems
	}
	if c.pod.HostNetwork && (override != nil || len(v.Elements) > 0) {
		c.problem(Problem{Field: HostNetworkField, Index: -1,
			Err: errors.New("true: the pod shares the node's network namespace, so no CNI plugin runs for it and its network selection annotations are never honoured")})
	}

	if err := c.readHostPortLevel(override); err != nil {
		return err
	}
	// Isolation first: no lookup of a NAD the pod may not select.
	overrideAllowed := override != nil && c.allowed(selection.DefaultNetworkAnnotation, -1, *override)
	allowed := make([]bool, len(v.Elements))
	for i, el := range v.Elements {
		allowed[i] = c.allowed(selection.NetworksAnnotation, i, el)
	}

	reserved, err := c.defaultNetworks()
	if err != nil {
		return err
	}
	switch {
	case overrideAllowed:
		if err := c.planOverride(*override); err != nil {
			return err
		}
	case override != nil: // forbidden: not looked up, not planned
		v.DefaultNetwork = &Attachment{Attachment: netconf.Attachment{Index: -1, NetworkKey: override.Key(), IfName: c.opts.DefaultIfName, Element: *override}}
	}
	err = c.planElements(allowed, reserved)
	c.numberDevices()
	return err
}

// problem records p.
func (c *checker) problem(p Problem) { c.v.Problems = append(c.v.Problems, p) }

// elementProblem records a problem of element index of annotation (-1 and
// the override's element 0 for the override) as a *selection.ValidationError.
func (c *checker) elementProblem(annotation string, index int, el selection.Element, field, value, reason, section string) {
	c.problem(Problem{Annotation: annotation, Field: AnnotationField(annotation), Index: index,
		Err: elementError(annotation, index, el, field, value, reason, section)})
}

// elementError is a *selection.ValidationError about element index of
// annotation, as pkg/spec/selection writes its own.
func elementError(annotation string, index int, el selection.Element, field, value, reason, section string) *selection.ValidationError {
	label, idx := "networks", index
	if annotation == selection.DefaultNetworkAnnotation {
		label, idx = "default-network", 0
	}
	return &selection.ValidationError{Annotation: label, Index: idx, Network: el.Name, Field: field, Value: value, Reason: reason, Section: section}
}

// note records a note about element index of annotation.
func (c *checker) note(annotation string, index int, el selection.Element, msg string) {
	c.v.Notes = append(c.v.Notes, AnnotationField(annotation)+": "+elementError(annotation, index, el, "", "", msg, "").Error())
}

// parseProblems records each problem of a selection.Parse error.
func (c *checker) parseProblems(annotation string, err error) {
	var ae *selection.AnnotationError
	if !errors.As(err, &ae) {
		c.problem(Problem{Annotation: annotation, Field: AnnotationField(annotation), Index: -1, Err: err})
		return
	}
	for _, p := range ae.Problems {
		idx := p.Index
		if annotation == selection.DefaultNetworkAnnotation {
			idx = -1
		}
		c.problem(Problem{Annotation: annotation, Field: AnnotationField(annotation), Index: idx, Err: p})
	}
}

// allowed checks isolation for element index of annotation and records the
// problem when it is forbidden.
func (c *checker) allowed(annotation string, index int, el selection.Element) bool {
	err := c.opts.Isolation.Check(c.pod.Namespace, el)
	var ie *selection.IsolationError
	if errors.As(err, &ie) && index >= 0 {
		ie.Index = index // names the element: "networks[i]: network …"
	}
	if err != nil {
		c.problem(Problem{Annotation: annotation, Field: AnnotationField(annotation), Index: index, Err: err})
		return false
	}
	return true
}

// defaultNetworks plans the pod's DefaultNetworks on net1, net2, … and
// returns their interface names for the pod's networks to skip.
func (c *checker) defaultNetworks() (map[string]string, error) {
	operator := c.opts.DefaultNetworksFor(c.pod.Namespace)
	if len(operator) == 0 {
		return nil, nil
	}
	elems := make([]selection.Element, len(operator))
	results := make([]*nadResult, len(operator))
	for i, op := range operator {
		elems[i] = selection.Element{Namespace: op.Namespace, Name: op.Name}
		r, err := c.lookup(op.Namespace, op.Name)
		if err != nil {
			return nil, err
		}
		results[i] = r
		field := fmt.Sprintf("%s[%d]", defaultNetworksField, i)
		switch {
		case r.problem != "":
			c.problem(Problem{Field: field, Index: -1, Err: errors.New(withSection(r.problem, r.section))})
		case r.resource != "":
			c.problem(Problem{Field: field, Index: -1, Err: fmt.Errorf("NetworkAttachmentDefinition %s names device resource %q; a network of defaultNetworks cannot be a device network (devices are requested at admission for the networks a pod selects only)", elems[i].Key(), r.resource)})
		case r.note != "":
			c.v.Notes = append(c.v.Notes, field+": "+r.note)
		}
	}
	names, _ := netconf.IfNames(elems, netconf.PlanOptions{DefaultIfName: c.opts.DefaultIfName})
	reserved := make(map[string]string, len(names))
	for i, el := range elems {
		a := Attachment{Attachment: netconf.Attachment{Index: -1, NetworkKey: el.Key(), IfName: names[i], Element: el},
			NAD: results[i].nad, Resource: results[i].resource, Config: results[i].source, Note: results[i].note}
		if results[i].list != nil && results[i].problem == "" && results[i].resource == "" {
			planned, err := netconf.PlanAttachment(netconf.Network{Element: el, ConfList: results[i].list}, names[i])
			if err == nil { // an element without keys always plans
				planned.Index = -1
				a.Attachment, a.Planned = planned, true
			}
		}
		c.v.DefaultNetworks = append(c.v.DefaultNetworks, a)
		reserved[names[i]] = fmt.Sprintf("network %q of multinetd's defaultNetworks", el.Key())
	}
	return reserved, nil
}

// planOverride plans the default-network override on the default network's
// interface, so that its ips, mac, … become capability args like any
// attachment's.
func (c *checker) planOverride(el selection.Element) error {
	const ann = selection.DefaultNetworkAnnotation
	r, err := c.lookup(el.Namespace, el.Name)
	if err != nil {
		return err
	}
	a := &Attachment{Attachment: netconf.Attachment{Index: -1, NetworkKey: el.Key(), IfName: c.opts.DefaultIfName, Element: el},
		NAD: r.nad, Resource: r.resource, Config: r.source, ClaimTemplate: r.claimTemplate}
	c.v.DefaultNetwork = a
	switch {
	case r.problem != "":
		c.elementProblem(ann, -1, el, "", "", r.problem, r.section)
		return nil
	case r.note != "":
		a.Note = r.note
		c.note(ann, -1, el, r.note)
	}
	c.plan(ann, -1, a, r.list)
	return nil
}

// planElements looks up the NAD of every allowed element, names the
// interfaces and plans each attachment.
func (c *checker) planElements(allowed []bool, reserved map[string]string) error {
	const ann = selection.NetworksAnnotation
	v := c.v
	if len(v.Elements) == 0 {
		return nil
	}
	names, nameErrs := netconf.IfNames(v.Elements, netconf.PlanOptions{DefaultIfName: c.opts.DefaultIfName, Reserved: reserved})
	stopped := false
	for i, el := range v.Elements {
		a := Attachment{Attachment: netconf.Attachment{Index: i, NetworkKey: el.Key(), IfName: names[i], Element: el}}
		var ne *netconf.IfNameError
		if errors.As(nameErrs[i], &ne) {
			reason := ne.Reason
			if ne.Owner != "" {
				reason = "is used by " + ne.Owner
			}
			c.elementProblem(ann, i, el, "interface", ne.IfName, reason, "4.1.2.1.5")
		}
		var r *nadResult
		if allowed[i] && !stopped {
			if _, seen := c.nads[el.Key()]; !seen && c.missing >= MaxMissingLookups {
				stopped = true
				c.problem(Problem{Annotation: ann, Field: AnnotationField(ann), Index: i,
					Err: fmt.Errorf("networks[%d] and later: not checked: lookups stopped after %d missing NetworkAttachmentDefinitions", i, MaxMissingLookups)})
			} else {
				var err error
				if r, err = c.lookup(el.Namespace, el.Name); err != nil {
					v.Attachments = append(v.Attachments, a)
					return err
				}
			}
		}
		if r != nil {
			a.NAD, a.Resource, a.Config, a.ClaimTemplate = r.nad, r.resource, r.source, r.claimTemplate
			switch {
			case r.problem != "":
				c.elementProblem(ann, i, el, "", "", r.problem, r.section)
			case r.note != "":
				a.Note = r.note
				c.note(ann, i, el, r.note)
			}
			if r.problem == "" && nameErrs[i] == nil {
				c.plan(ann, i, &a, r.list)
			}
		}
		v.Attachments = append(v.Attachments, a)
	}
	return nil
}

// plan plans attachment a with list and records a key that list cannot
// honour.
func (c *checker) plan(annotation string, index int, a *Attachment, list *libcni.NetworkConfigList) {
	if reason := c.refuseCNIArgs(a); reason != "" {
		c.elementProblem(annotation, index, a.Element, "cni-args", "", reason, "4.1.2.1.6")
		return
	}
	if reason := c.refusePortMappings(a.Element); reason != "" {
		c.elementProblem(annotation, index, a.Element, "portMappings", "", reason, "4.1.2.1.7")
		return
	}
	planned, err := netconf.PlanAttachment(netconf.Network{Element: a.Element, ConfList: list,
		HandOverUndeclared: c.opts.UndeclaredCapabilities.handOver()}, a.IfName)
	if err != nil {
		if errors.Is(err, netconf.ErrNoCapability) {
			a.Undeclared = netconf.UndeclaredKeys(&a.Element, list) // for lint's list
		}
		var ke *netconf.KeyError
		if errors.As(err, &ke) {
			c.elementProblem(annotation, index, a.Element, ke.Key, "", ke.Reason, ke.Section)
		} else {
			c.elementProblem(annotation, index, a.Element, "", "", err.Error(), "")
		}
		return
	}
	planned.Index = index
	a.Attachment, a.Planned = planned, true
}

// numberDevices sets Device: the n-th device-plugin attachment of a
// resource (the override first) gets device n; and Claim: the n-th DRA
// attachment gets the pod's claim ClaimNamePrefix + n.
func (c *checker) numberDevices() {
	used := map[string]int64{}
	claims := 0
	number := func(a *Attachment) {
		if a.ClaimTemplate != "" {
			claims++
			a.Claim = fmt.Sprintf("%s%d", ClaimNamePrefix, claims)
			return
		}
		if a.Resource != "" {
			used[a.Resource]++
			a.Device = used[a.Resource]
		}
	}
	if c.v.DefaultNetwork != nil {
		number(c.v.DefaultNetwork)
	}
	for i := range c.v.Attachments {
		number(&c.v.Attachments[i])
	}
}

// lookup returns what Check knows of NAD namespace/name, looking it up and
// resolving its config the first time. Errors: *LookupError.
func (c *checker) lookup(namespace, name string) (*nadResult, error) {
	key := namespace + "/" + name
	if r, ok := c.nads[key]; ok {
		return r, nil
	}
	r := &nadResult{}
	nad, err := c.opts.NADs.Get(c.ctx, namespace, name)
	switch {
	case apierrors.IsNotFound(err):
		c.missing++
		r.problem, r.section = fmt.Sprintf("NetworkAttachmentDefinition %s not found", key), "3.4.1"
	case isNotKnown(err):
		r.note = err.Error() + "; its config and capabilities are not checked"
		r.source = ConfigUnknown
		if r.list, err = standIn(namespace, name); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, &LookupError{NAD: key, Err: err}
	default:
		r.nad = nad
		c.resolve(r, namespace, name)
		if err := c.checkTrust(r, namespace, name); err != nil {
			return nil, err
		}
	}
	c.nads[key] = r
	return r, nil
}

// resolve fills in r's resource name and config list from its NAD.
func (c *checker) resolve(r *nadResult, namespace, name string) {
	key := namespace + "/" + name
	rn, err := ResourceName(r.nad, c.opts.ResourceNameKeys)
	if err != nil {
		r.problem = fmt.Sprintf("NetworkAttachmentDefinition %s: %v", key, err)
		return
	}
	r.resource = rn
	if r.claimTemplate, err = ClaimTemplate(r.nad, rn); err != nil {
		r.problem = fmt.Sprintf("NetworkAttachmentDefinition %s: %v", key, err)
		return
	}
	config := r.nad.Spec.Config
	switch {
	case c.opts.Configs != nil:
		r.list, err = c.opts.Configs.Resolve(namespace, name, config)
		r.source = ConfigSpec
		if config == "" {
			r.source = ConfigNode
		}
	case config == "":
		r.source = ConfigUnknown
		r.note = fmt.Sprintf("NetworkAttachmentDefinition %s has no spec.config: multinetd uses the CNI config named %q in the node's CNI conf dir (spec §3.4.1), which is not visible here; its capabilities are not checked", key, name)
		r.list, err = standIn(namespace, name)
	default:
		r.source = ConfigSpec
		r.list, err = netconf.Resolve(namespace, name, config, nil)
	}
	if err != nil {
		r.list, r.source = nil, ""
		r.problem, r.section = err.Error(), "3.4.1"
	}
}

// standInConfig stands for a CNI config that is not visible: one plugin
// declaring every capability a selection element can ask for, so that
// planning checks only what does not depend on the config.
const standInConfig = `{"cniVersion":"1.0.0","type":"multinet-stand-in","capabilities":` +
	`{"ips":true,"mac":true,"portMappings":true,"bandwidth":true,"infinibandGUID":true,"ipamClaimReference":true}}`

// standIn returns the stand-in config list named after NAD namespace/name.
func standIn(namespace, name string) (*libcni.NetworkConfigList, error) {
	list, err := netconf.Resolve(namespace, name, standInConfig, nil)
	if err != nil {
		return nil, fmt.Errorf("podnetworks: stand-in config for %s/%s: %w", namespace, name, err)
	}
	return list, nil
}

// withSection appends " (spec §section)" to msg when section is set.
func withSection(msg, section string) string {
	if section == "" {
		return msg
	}
	return msg + " (spec §" + section + ")"
}
