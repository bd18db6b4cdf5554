package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/libcni"
)

// hostLocalDefaultDataDir is host-local's dataDir when its config sets none.
const hostLocalDefaultDataDir = "/var/lib/cni/networks"

// hostLocalDir returns the directory where host-local keeps the
// allocations of list (its ipam dataDir, default /var/lib/cni/networks,
// then the network's name), "" when no plugin of list has host-local IPAM.
func hostLocalDir(list *libcni.NetworkConfigList) string {
	for _, p := range list.Plugins {
		var c struct {
			IPAM struct {
				Type    string `json:"type"`
				DataDir string `json:"dataDir"`
			} `json:"ipam"`
		}
		if err := json.Unmarshal(p.Bytes, &c); err != nil || c.IPAM.Type != "host-local" {
			continue
		}
		dir := c.IPAM.DataDir
		if dir == "" {
			dir = hostLocalDefaultDataDir
		}
		return filepath.Join(dir, list.Name)
	}
	return ""
}

// allocationsOf lists the host-local allocation files in dir owned by one
// of ids.
func allocationsOf(dir string, ids map[string]bool) []string {
	return hostLocalOwned(dir, func(owner string) bool { return ids[owner] })
}

// hostLocalOwned lists the host-local allocation files under dir (one file
// per address, named by the address; its first line is the owner's
// container ID, then the interface name) whose owner owned accepts.
func hostLocalOwned(dir string, owned func(owner string) bool) []string {
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		owner, _, _ := strings.Cut(string(b), "\n")
		if owned(strings.TrimSpace(owner)) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// checkReleased verifies, after p's DEL of sbs, that none of them still
// holds an address of the default network (host-local's files). What is
// left counts against p (results.leaked, which fails the run) and is
// removed, so that a leaking path does not exhaust the subnet for the
// others. The stub path attaches nothing and is not checked.
func (b *bench) checkReleased(p *path, sbs ...*sandbox) {
	if b.defaultIPAMDir == "" || p == b.stubPath {
		return
	}
	ids := make(map[string]bool, len(sbs))
	for _, sb := range sbs {
		ids[sb.containerID] = true
	}
	left := allocationsOf(b.defaultIPAMDir, ids)
	if len(left) == 0 {
		return
	}
	if b.res.leaked == nil {
		b.res.leaked = map[string]int{}
	}
	if b.res.leaked[p.name] == 0 {
		logf("%s: DEL left %d default-network allocations (e.g. %s); counted and removed", p.name, len(left), left[0])
	}
	b.res.leaked[p.name] += len(left)
	for _, f := range left {
		_ = os.Remove(f)
	}
}
