package netconf

import (
	"encoding/json"
	"fmt"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/utils"
)

// ValidateNetworkName checks a CNI network name that names a directory
// with libcni's rule for network names (utils.ValidateNetworkName: an
// alphanumeric character, then alphanumerics, '_', '.' and '-'), which also
// keeps it a single path element.
func ValidateNetworkName(name string) error {
	if verr := utils.ValidateNetworkName(name); verr != nil {
		return fmt.Errorf("%q is not a CNI network name: %s", name, verr.Msg)
	}
	return nil
}

// LoadAuxiliaryChain returns the auxiliary chain name (multinetd's
// auxiliaryChain, Multus's auxiliaryCNIChainName): a config list named name,
// in cniVersion, whose plugins are the .conf files of the directory
// confDir/name in lexical order (libcni.NetworkPluginConfsFromFiles, CNI
// spec 1.1 sub-directory plugins), every plugin inlined in its Bytes. It
// returns nil and no error when the directory is missing or holds no .conf
// file: then there is nothing to run. Errors name the directory or file.
func LoadAuxiliaryChain(confDir, name, cniVersion string) (*libcni.NetworkConfigList, error) {
	return LoadAuxiliaryChainIn("", confDir, name, cniVersion)
}

// LoadAuxiliaryChainIn is LoadAuxiliaryChain with confDir a node path read
// through root, the node's root in the daemon's view, with every symlink in
// confDir/name and its files resolved inside root as the node resolves it
// (ConfDirOptions.Root); "" reads confDir as the daemon sees it. A link
// that climbs above the node's "/" or loops is an error naming the path.
func LoadAuxiliaryChainIn(root, confDir, name, cniVersion string) (*libcni.NetworkConfigList, error) {
	if err := ValidateNetworkName(name); err != nil {
		return nil, fmt.Errorf("auxiliary chain: %w", err)
	}
	plugins, err := pluginConfsFromFiles(root, confDir, name)
	if err != nil {
		return nil, fmt.Errorf("auxiliary chain %q: %w", name, err)
	}
	if len(plugins) == 0 {
		return nil, nil
	}
	for i, p := range plugins {
		if err := validatePluginType(p.Network.Type, ShimType); err != nil {
			return nil, fmt.Errorf("auxiliary chain %q: plugin %d (%s/%s): type: %w", name, i, confDir, name, err)
		}
	}
	return rebuildList(&libcni.NetworkConfigList{Name: name, CNIVersion: cniVersion}, plugins, true)
}

// ChainOnto makes prev the prevResult of the first plugin of the attachment's
// list (converted to the list's cniVersion), as if the list continued the
// chain that produced prev. libcni passes no prevResult to a list's first
// plugin on ADD, so chained-only plugins (tuning, bandwidth, portmap, …)
// could not run first; on DEL and CHECK libcni's cached result replaces it.
func (a *Attachment) ChainOnto(prev types.Result) error {
	conv, err := prev.GetAsVersion(a.ConfList.CNIVersion)
	if err != nil {
		return fmt.Errorf("network %q: prevResult in cniVersion %s: %w", a.NetworkKey, a.ConfList.CNIVersion, err)
	}
	raw, err := json.Marshal(conv)
	if err != nil {
		return fmt.Errorf("network %q: encode prevResult: %w", a.NetworkKey, err)
	}
	list, err := setPluginField(a.ConfList, 0, "prevResult", json.RawMessage(raw))
	if err != nil {
		return fmt.Errorf("network %q: inject prevResult: %w", a.NetworkKey, err)
	}
	a.ConfList = list
	return nil
}
