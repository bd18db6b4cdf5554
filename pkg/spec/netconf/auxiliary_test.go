package netconf

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	current "github.com/containernetworking/cni/pkg/types/100"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The chain is the sub-directory's .conf files in lexical order, under the
// chain's name and the given cniVersion, every plugin inlined in Bytes (the
// record must be enough to DEL it).
func TestLoadAuxiliaryChain(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, filepath.Join(dir, "aux"), map[string]string{
		"20-b.conf":     `{"type":"bandwidth"}`,
		"10-a.conf":     `{"cniVersion":"0.4.0","name":"x","type":"tuning"}`,
		"30-c.conflist": `{"type":"ignored"}`,
		"README":        `not a config`,
	})
	list, err := LoadAuxiliaryChain(dir, "aux", "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, p := range list.Plugins {
		types = append(types, p.Network.Type)
	}
	if !slices.Equal(types, []string{"tuning", "bandwidth"}) || list.Name != "aux" || list.CNIVersion != "1.0.0" {
		t.Fatalf("chain %q %s plugins %q, want aux 1.0.0 [tuning bandwidth]", list.Name, list.CNIVersion, types)
	}
	again, err := libcni.ConfListFromBytes(list.Bytes)
	if err != nil || len(again.Plugins) != 2 || again.Name != "aux" {
		t.Fatalf("Bytes %s do not round-trip: %v", list.Bytes, err)
	}
}

func TestLoadAuxiliaryChainNone(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"missing", "empty"} {
		if name == "empty" {
			writeFiles(t, filepath.Join(dir, name), nil)
		}
		list, err := LoadAuxiliaryChain(dir, name, "1.0.0")
		if list != nil || err != nil {
			t.Errorf("%s directory: %v, %v; want nil, nil", name, list, err)
		}
	}
}

func TestLoadAuxiliaryChainErrors(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, filepath.Join(dir, "shim"), map[string]string{"1.conf": `{"type":"multinet-shim"}`})
	writeFiles(t, filepath.Join(dir, "broken"), map[string]string{"1.conf": `{"type":`})
	for name, want := range map[string]string{
		"../x":   "not a CNI network name",
		"shim":   "multinet-shim",
		"broken": "broken",
	} {
		if _, err := LoadAuxiliaryChain(dir, name, "1.0.0"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("LoadAuxiliaryChain(%q) error = %v, want one naming %q", name, err, want)
		}
	}
}

// ChainOnto puts the previous result, in the list's cniVersion, into the
// first plugin's prevResult, and leaves the other plugins alone.
func TestChainOnto(t *testing.T) {
	list, err := libcni.ConfListFromBytes([]byte(`{"cniVersion":"0.4.0","name":"aux","plugins":[{"type":"tuning"},{"type":"bandwidth"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	a := Attachment{NetworkKey: "aux", ConfList: list}
	prev := &current.Result{CNIVersion: "1.0.0", Interfaces: []*current.Interface{{Name: "eth0", Sandbox: "/ns"}}}
	if err := a.ChainOnto(prev); err != nil {
		t.Fatal(err)
	}
	var first struct {
		PrevResult struct {
			CNIVersion string `json:"cniVersion"`
			Interfaces []struct {
				Name string `json:"name"`
			} `json:"interfaces"`
		} `json:"prevResult"`
	}
	if err := json.Unmarshal(a.ConfList.Plugins[0].Bytes, &first); err != nil {
		t.Fatal(err)
	}
	if first.PrevResult.CNIVersion != "0.4.0" || len(first.PrevResult.Interfaces) != 1 || first.PrevResult.Interfaces[0].Name != "eth0" {
		t.Errorf("first plugin %s: want prevResult 0.4.0 with eth0", a.ConfList.Plugins[0].Bytes)
	}
	if strings.Contains(string(a.ConfList.Plugins[1].Bytes), "prevResult") || !strings.Contains(string(a.ConfList.Bytes), `"prevResult"`) {
		t.Errorf("list bytes %s: want prevResult in the first plugin only", a.ConfList.Bytes)
	}
}
