package attach

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/multinet/multinet/pkg/cniserver/api"
)

// CNI_ARGS keys Kubernetes runtimes pass (CNI CONVENTIONS, "CNI_ARGS").
const (
	argPodNamespace = "K8S_POD_NAMESPACE"
	argPodName      = "K8S_POD_NAME"
	argPodUID       = "K8S_POD_UID"
	argInfraID      = "K8S_POD_INFRA_CONTAINER_ID"
	argIgnore       = "IgnoreUnknown"
)

// podArgs is the pod identity of a request and the CNI_ARGS pairs passed on
// to every delegate.
type podArgs struct {
	Namespace, Name, UID string
	// Pairs are the runtime's CNI_ARGS in order, with IgnoreUnknown=1 first
	// (delegates that do not know K8S_* keys must not fail on them).
	Pairs [][2]string
}

// hasPod reports whether the request names a Kubernetes pod.
func (a podArgs) hasPod() bool { return a.Namespace != "" && a.Name != "" }

// parseArgs splits CNI_ARGS ("K1=V1;K2=V2"). Errors name the malformed item.
func parseArgs(s string) (podArgs, error) {
	var a podArgs
	a.Pairs = append(a.Pairs, [2]string{argIgnore, "1"})
	if strings.TrimSpace(s) == "" {
		return a, nil
	}
	for i, item := range strings.Split(s, ";") {
		if item == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		if !ok || k == "" {
			return podArgs{}, fmt.Errorf("CNI_ARGS item %d %q: want KEY=VALUE", i, item)
		}
		switch k {
		case argIgnore:
			continue // already first
		case api.ArgNetworkNamespace:
			continue // multinetd's own, set per attachment
		case argPodNamespace:
			a.Namespace = v
		case argPodName:
			a.Name = v
		case argPodUID:
			a.UID = v
		}
		a.Pairs = append(a.Pairs, [2]string{k, v})
	}
	return a, nil
}

// configVersion returns the "cniVersion" of the runtime's network
// configuration (the shim's stdin). Errors name the field.
func configVersion(config []byte) (string, error) {
	var c struct {
		CNIVersion string `json:"cniVersion"`
	}
	if err := json.Unmarshal(config, &c); err != nil {
		return "", fmt.Errorf("network configuration: %w", err)
	}
	if c.CNIVersion == "" {
		return "", fmt.Errorf("network configuration: field cniVersion is missing")
	}
	return c.CNIVersion, nil
}
