package attach

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"k8s.io/klog/v2"

	"github.com/multinet/multinet/internal/process/atomicfile"
)

// The networks multinetd has attached on the node: one file per CNI network
// name under <record dir>/networks, holding the last config list ADD ran for
// it. GC runs the delegates' GC (libcni GCNetworkList with
// cni.dev/valid-attachments) on each of them, not only on the networks of
// live records, so that the attachments of containers whose record was
// lost or corrupt are reclaimed by the plugins (docs/decisions/state.md
// "Corrupt records"). A network is forgotten after a GC of it succeeded
// while no live record used it (nothing of ours is left in it); the next
// ADD on it remembers it again. The set is therefore bounded by the
// networks in use plus those whose GC keeps failing.

// networksDir is where the remembered networks are.
func (e *Engine) networksDir() string { return filepath.Join(e.opts.Store.Dir(), "networks") }

// validNetworkFile reports whether name can be a file name: libcni's own
// network name rule (letters, digits, '_', '.', '-', not first) is stricter.
func validNetworkFile(name string) bool {
	return name != "" && !strings.ContainsAny(name, "/\\\x00") && !strings.HasPrefix(name, ".") && len(name) <= 200
}

// rememberNetworks records the config list of every attachment of p (before
// its delegates run). A file already holding the same bytes is not
// rewritten; writes are not fsynced (a lost one is rewritten by the next
// ADD on the network). Failures are logged: they only weaken a later GC.
func (e *Engine) rememberNetworks(log klog.Logger, p *plan) {
	dir := e.networksDir()
	for _, a := range p.attachments {
		list := a.ConfList
		if list == nil || !validNetworkFile(list.Name) {
			continue
		}
		path := filepath.Join(dir, list.Name+".json")
		if known, ok := e.remembered.Load(path); ok && bytes.Equal(known.([]byte), list.Bytes) {
			continue
		}
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, list.Bytes) {
			e.remembered.Store(path, list.Bytes)
			continue
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			log.Error(err, "remember the networks of an ADD")
			return
		}
		if err := atomicfile.WriteFile(path, list.Bytes, 0o600, atomicfile.NoSync()); err != nil {
			log.Error(err, "remember a network for GC", "network", list.Name)
			continue
		}
		e.remembered.Store(path, list.Bytes)
	}
}

// rememberedNetworks returns the remembered config lists by network name.
// An unreadable file is logged and skipped.
func (e *Engine) rememberedNetworks(log klog.Logger) map[string]*libcni.NetworkConfigList {
	entries, err := os.ReadDir(e.networksDir())
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			log.Error(err, "GC: read the remembered networks")
		}
		return nil
	}
	out := map[string]*libcni.NetworkConfigList{}
	for _, d := range entries {
		name := d.Name()
		if d.IsDir() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
			continue
		}
		path := filepath.Join(e.networksDir(), name)
		data, err := os.ReadFile(path)
		if err != nil {
			log.Error(err, "GC: read a remembered network", "file", path)
			continue
		}
		list, err := libcni.ConfListFromBytes(data)
		if err != nil || list.Name+".json" != name {
			log.Error(err, "GC: a remembered network does not decode; removing it", "file", path)
			_ = os.Remove(path)
			e.remembered.Delete(path)
			continue
		}
		out[list.Name] = list
	}
	return out
}

// forgetNetwork removes the remembered network name.
func (e *Engine) forgetNetwork(log klog.Logger, name string) {
	if !validNetworkFile(name) {
		return
	}
	path := filepath.Join(e.networksDir(), name+".json")
	e.remembered.Delete(path)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		log.Error(err, "GC: forget a network", "network", name)
	}
}

// protectValid adds to the valid attachments of each network the
// attachments libcni's cache holds for containers the runtime listed as
// valid: an ADD that began after GC listed the records (its record is not
// among them) is then not DELed by the network's GC, nor an attachment a
// valid container's record no longer names.
func protectValid(log klog.Logger, cni *libcni.CNIConfig, valid map[string]bool, networks map[string]*gcNetwork) {
	cached, err := cni.GetCachedAttachments("")
	if err != nil {
		log.Error(err, "GC: read libcni's cache")
		return
	}
	for _, c := range cached {
		if n, ok := networks[c.Network]; ok && valid[c.ContainerID] {
			a := types.GCAttachment{ContainerID: c.ContainerID, IfName: c.IfName}
			if !slices.Contains(n.valid, a) {
				n.valid = append(n.valid, a)
			}
		}
	}
}
