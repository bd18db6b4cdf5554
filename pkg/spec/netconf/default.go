package netconf

import (
	"errors"
	"fmt"

	"github.com/containernetworking/cni/libcni"
)

// NADConfig is the part of a NetworkAttachmentDefinition this package reads.
type NADConfig struct {
	Namespace string
	Name      string
	// Config is spec.config, possibly empty.
	Config string
}

// DefaultNetwork says where the cluster-wide default network's CNI config
// comes from (spec §6 leaves it to the implementation). At most one field may
// be set; none set means the lexically first usable file of the conf dir.
type DefaultNetwork struct {
	// NAD is a NetworkAttachmentDefinition, resolved like any other (§3.4.1).
	NAD *NADConfig
	// Path is a CNI config file (.conflist, .conf or .json).
	Path string
	// Name is a CNI network name looked up in the conf dir (.conflist first).
	Name string
}

// LoadDefault returns the default network's config list and a label for it
// (the NAD key, the file path or the network name) for errors and
// network-status. dir is the CNI conf dir holding the default network's file;
// it may be nil only when src names a NAD with spec.config or a Path.
func LoadDefault(src DefaultNetwork, dir *ConfDir) (*libcni.NetworkConfigList, string, error) {
	set := 0
	for _, ok := range []bool{src.NAD != nil, src.Path != "", src.Name != ""} {
		if ok {
			set++
		}
	}
	if set > 1 {
		return nil, "", errors.New("default network: set only one of NetworkAttachmentDefinition, path and name")
	}
	var source ConfigSource
	if dir != nil {
		source = dir
	}
	switch {
	case src.NAD != nil:
		key := src.NAD.Namespace + "/" + src.NAD.Name
		list, err := Resolve(src.NAD.Namespace, src.NAD.Name, src.NAD.Config, source)
		if err != nil {
			return nil, key, fmt.Errorf("default network: %w", err)
		}
		return list, key, nil
	case src.Path != "":
		if dir == nil {
			dir = NewConfDir(ConfDirOptions{})
		}
		list, err := dir.LoadFile(src.Path)
		if err != nil {
			return nil, src.Path, fmt.Errorf("default network: %w", err)
		}
		return list, src.Path, nil
	case dir == nil:
		return nil, "", errors.New("default network: no CNI config directory")
	case src.Name != "":
		list, err := dir.Lookup(src.Name)
		if err != nil {
			return nil, src.Name, fmt.Errorf("default network %q: %w", src.Name, err)
		}
		return list, src.Name, nil
	default:
		list, path, err := dir.First()
		if err != nil {
			return nil, "", fmt.Errorf("default network: %w", err)
		}
		return list, path, nil
	}
}
