package v1

// Well-known annotation keys of the NPWG specs.
const (
	// ResourceNameAnnotation on a NetworkAttachmentDefinition names the
	// extended resource (device plugin resource, "vendor.example/pool") a pod
	// attached to the network needs one unit of per attachment. The admission
	// webhook adds it to the pod's container requests/limits and the daemon
	// looks the allocated device ID up through PodResources (spec 001, "cni-dp"
	// proposal; the key as used by the NPWG implementations).
	ResourceNameAnnotation = "k8s.v1.cni.cncf.io/resourceName"

	// LegacyResourceNameAnnotation is the spelling of ResourceNameAnnotation
	// in the original "cni-dp" proposal slides (spec 001). Readers may accept
	// it as an alias; writers use ResourceNameAnnotation.
	LegacyResourceNameAnnotation = "kubernetes.v1.cni.cncf.io/resourceName"

	// NetworksAnnotation on a pod selects the networks to attach: a
	// comma-delimited list or a JSON list of network selection elements
	// (multi-net spec §4.1).
	NetworksAnnotation = "k8s.v1.cni.cncf.io/networks"

	// NetworkStatusAnnotation on a pod reports the result of each network
	// attachment as a JSON list of maps (multi-net spec §5).
	NetworkStatusAnnotation = "k8s.v1.cni.cncf.io/network-status"
)
