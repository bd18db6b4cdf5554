package attach

import (
	"context"
	"strings"
	"testing"

	"github.com/multinet/multinet/internal/node/cnirequest"
	"github.com/multinet/multinet/internal/node/cniserver/api"
	"github.com/multinet/multinet/internal/testing/cnitest"
)

// Every delegate multinetd runs gets the namespace of its attachment's
// NetworkAttachmentDefinition in CNI_ARGS MULTINET_NETWORK_NAMESPACE (the
// IPAM plugin it runs inherits it: multinet-ipam decides whose pool the
// network names from it), empty for the default network of a CNI config
// file (the admin's); the runtime's pair of that key (here claiming
// kube-system, an admin namespace) reaches no delegate.
func TestAddNetworkNamespaceArg(t *testing.T) {
	e := newEnv(t, nil)
	e.bridgeNAD("net-a")
	pod := e.podWithNetworks("net-a")
	id := "ctr-" + cnitest.UniqueName("")
	w := e.wire(api.CmdAdd, id, pod)
	w.Args += ";" + api.ArgNetworkNamespace + "=kube-system"
	if _, err := e.eng.Add(context.Background(), cnirequest.Decode(w)); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"eth0": api.ArgNetworkNamespace + "=", "net1": api.ArgNetworkNamespace + "=" + podNS}
	adds := e.exec.of("ADD")
	if len(adds) != 2 {
		t.Fatalf("%d delegate ADDs, want the default network's and net-a's", len(adds))
	}
	for _, c := range adds {
		var got []string
		for _, kv := range strings.Split(c.Args, ";") {
			if strings.HasPrefix(kv, api.ArgNetworkNamespace+"=") {
				got = append(got, kv)
			}
		}
		if len(got) != 1 || got[0] != want[c.IfName] {
			t.Errorf("%s ADD on %s: CNI_ARGS %q has %q, want only %q", c.Plugin, c.IfName, c.Args, got, want[c.IfName])
		}
	}
	e.del(id, pod)
}
