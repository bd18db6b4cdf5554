package dra

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"

	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/multinet/multinet/internal/devices/deviceplugin/pool"
	"github.com/multinet/multinet/internal/process/atomicfile"
)

// cdiKind is the CDI kind ("vendor/class") of the devices the driver
// describes in CDI specs.
const cdiKind = "multinet.io/net"

// cdiVersion is the CDI specification version of the specs written: 0.5.0
// added deviceNodes[].hostPath, the newest field used.
const cdiVersion = "0.5.0"

type cdiDevice struct {
	name string
	dev  pool.Device
}

// cdiSpecPath is the claim's CDI spec file: "<dir>/<driver>-<claim UID>.json".
func cdiSpecPath(dir, driver string, claim types.UID) string {
	return filepath.Join(dir, driver+"-"+string(claim)+".json")
}

// writeCDISpec writes the CDI spec of a claim's devices with mounts or
// device nodes; nothing when devs is empty.
func writeCDISpec(dir, driver string, claim types.UID, devs []cdiDevice) error {
	if len(devs) == 0 {
		return nil
	}
	spec := cdispec.Spec{Version: cdiVersion, Kind: cdiKind}
	for _, cd := range devs {
		sd := cdispec.Device{Name: cd.name}
		for _, m := range cd.dev.Mounts {
			opt := "rw"
			if m.ReadOnly {
				opt = "ro"
			}
			sd.ContainerEdits.Mounts = append(sd.ContainerEdits.Mounts, &cdispec.Mount{HostPath: m.HostPath, ContainerPath: m.ContainerPath, Options: []string{"rbind", opt}})
		}
		for _, n := range cd.dev.DeviceNodes {
			sd.ContainerEdits.DeviceNodes = append(sd.ContainerEdits.DeviceNodes, &cdispec.DeviceNode{Path: n.ContainerPath, HostPath: n.HostPath, Permissions: n.Permissions})
		}
		spec.Devices = append(spec.Devices, sd)
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("CDI spec: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("CDI spec directory: %w", err)
	}
	if err := atomicfile.WriteFile(cdiSpecPath(dir, driver, claim), b, 0o644); err != nil {
		return fmt.Errorf("CDI spec: %w", err)
	}
	return nil
}

func removeCDISpec(dir, driver string, claim types.UID) error {
	err := os.Remove(cdiSpecPath(dir, driver, claim))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove CDI spec: %w", err)
	}
	return nil
}
