package cnirequest

import (
	"encoding/json"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/multinet/multinet/internal/node/cniserver/api"
)

// TestDecode: a request is decoded once, for its command; what cannot be
// decoded is Invalid with the CNI error code ADD and GC answer with.
func TestDecode(t *testing.T) {
	const pod = "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_UID=u;" + api.ArgNetworkNamespace + "=kube-system"
	tests := []struct {
		name, cmd, args, config string
		wantCode                uint // 0: valid
		wantRC                  bool
	}{
		{"ADD", api.CmdAdd, pod, `{"cniVersion":"1.0.0","runtimeConfig":{"portMappings":[]}}`, 0, true},
		{"ADD without cniVersion", api.CmdAdd, "K8S_POD_NAME", `{"runtimeConfig":[1]}`, types.ErrDecodingFailure, false},
		{"ADD with malformed CNI_ARGS", api.CmdAdd, "K8S_POD_NAME", `{"cniVersion":"1.0.0","runtimeConfig":[1]}`, types.ErrInvalidEnvironmentVariables, false},
		{"ADD whose runtimeConfig is no object", api.CmdAdd, pod, `{"cniVersion":"1.0.0","runtimeConfig":[1]}`, types.ErrDecodingFailure, false},
		{"DEL ignores a runtimeConfig it cannot read", api.CmdDel, pod, `{"runtimeConfig":[1]}`, 0, false},
		{"GC", api.CmdGC, "", `{"cni.dev/valid-attachments":[{"containerID":"c","ifname":"eth0"}]}`, 0, false},
		{"GC with malformed valid attachments", api.CmdGC, "", `{"cni.dev/valid-attachments":{}}`, types.ErrDecodingFailure, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Decode(&api.Request{V: api.Version, Command: tt.cmd, ContainerID: "c", IfName: "eth0", Args: tt.args, Path: "/opt/cni/bin", Config: json.RawMessage(tt.config)})
			if tt.wantCode == 0 && r.Invalid != nil || tt.wantCode != 0 && (r.Invalid == nil || r.Invalid.Code != tt.wantCode) {
				t.Fatalf("Invalid = %v, want code %d", r.Invalid, tt.wantCode)
			}
			if got := r.RuntimeConfig != nil; got != tt.wantRC {
				t.Errorf("RuntimeConfig = %v, want set: %v", r.RuntimeConfig, tt.wantRC)
			}
			if r.CNIPath != "/opt/cni/bin" || r.RawArgs != tt.args {
				t.Errorf("CNIPath, RawArgs = %q, %q", r.CNIPath, r.RawArgs)
			}
		})
	}
	r := Decode(&api.Request{V: api.Version, Command: api.CmdAdd, Args: pod, Config: json.RawMessage(`{"cniVersion":"1.0.0"}`)})
	if r.Args.Namespace != "ns" || r.Args.Name != "p" || r.Args.UID != "u" || r.CNIVersion != "1.0.0" {
		t.Errorf("pod %+v, cniVersion %q", r.Args, r.CNIVersion)
	}
	for _, kv := range r.Args.Pairs {
		if kv[0] == api.ArgNetworkNamespace {
			t.Errorf("the runtime's %s pair reached the delegates' CNI_ARGS: %v", api.ArgNetworkNamespace, r.Args.Pairs)
		}
	}
	if len(r.Args.Pairs) == 0 || r.Args.Pairs[0] != [2]string{"IgnoreUnknown", "1"} {
		t.Errorf("CNI_ARGS pairs %v, want IgnoreUnknown=1 first", r.Args.Pairs)
	}
	if g := Decode(&api.Request{V: api.Version, Command: api.CmdGC, Config: json.RawMessage(`{"cni.dev/valid-attachments":[{"containerID":"c","ifname":"eth0"}]}`)}); len(g.ValidAttachments) != 1 {
		t.Errorf("GC valid attachments %v", g.ValidAttachments)
	}
}
