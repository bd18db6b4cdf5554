package attach

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/multinet/multinet/internal/node/cniserver/api"
	"github.com/multinet/multinet/internal/node/nodeexec"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/internal/testing/cnitest"
)

// Node layouts: a NAD whose plugin is a link that climbs above the node's "/"
// or loops fails the ADD with an error naming the link, before any delegate
// runs, and the pod stays deletable: its DEL runs nothing and succeeds.
func TestAddRefusesEscapingPluginLinksAndDelStillWorks(t *testing.T) {
	links := t.TempDir()
	for name, target := range map[string]string{"mnu-escape": "/../../bridge", "mnu-loop": "mnu-loop"} {
		if err := os.Symlink(target, filepath.Join(links, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ plugin, want string }{
		{"mnu-escape", "via symlink " + filepath.Join(links, "mnu-escape") + " -> /../../bridge: " + nodeexec.ErrLeavesRoot.Error()},
		{"mnu-loop", "node path " + filepath.Join(links, "mnu-loop") + " (node root /)"},
	} {
		t.Run(tc.plugin, func(t *testing.T) {
			e := newEnv(t, func(o *envOptions) { o.BinDirs = []string{links, cnitest.BinDir(t)} })
			e.exec.Exec = &nodeexec.Exec{Root: "/", Stderr: os.Stderr}
			e.nads.put(podNS, "net-x", strings.Replace(e.bridgeConf("net-x", ""), `"type":"bridge"`, `"type":"`+tc.plugin+`"`, 1), nil)
			pod := e.podWithNetworks("net-x")
			id := "ctr-" + cnitest.UniqueName("")

			_, err := e.eng.Add(context.Background(), e.req(api.CmdAdd, id, pod))
			var te *types.Error
			if !errors.As(err, &te) || !strings.Contains(te.Msg, "ns1/net-x") || !strings.Contains(te.Msg, tc.want) {
				t.Fatalf("ADD error = %v, want a CNI error naming ns1/net-x and %q", err, tc.want)
			}
			if got := e.exec.of(""); len(got) != 0 {
				t.Fatalf("delegates ran during the refused ADD: %+v", got)
			}
			if err := e.eng.Del(context.Background(), e.req(api.CmdDel, id, pod)); err != nil {
				t.Fatalf("DEL after the refused ADD: %v", err)
			}
			if _, err := e.store.Load(id); !errors.Is(err, state.ErrNotFound) {
				t.Errorf("record after DEL: %v, want ErrNotFound", err)
			}
		})
	}
}
