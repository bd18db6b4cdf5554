package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/multinet/multinet/internal/node/cniserver"
	"github.com/multinet/multinet/internal/node/cniserver/api"
)

// stubResult is the stub daemon's ADD answer: one interface with one
// address, about the size of the default network's result.
const stubResult = `{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","mac":"0a:58:0a:f4:00:05","sandbox":"/var/run/netns/x"}],` +
	`"ips":[{"address":"10.244.0.5/24","gateway":"10.244.0.1","interface":0}],"routes":[{"dst":"0.0.0.0/0"}],"dns":{}}`

// stubHandler answers every operation at once, without work: what is left
// of an operation through it is libcni, the shim's exec and the socket.
type stubHandler struct{}

func (stubHandler) Add(context.Context, *api.Request) ([]byte, error) { return []byte(stubResult), nil }
func (stubHandler) Del(context.Context, *api.Request) error           { return nil }
func (stubHandler) Check(context.Context, *api.Request) error         { return nil }
func (stubHandler) GC(context.Context, *api.Request) error            { return nil }
func (stubHandler) Status(context.Context, *api.Request) error        { return nil }

// stubDaemon is internal/node/cniserver serving stubHandler on a socket in the bench
// process: the floor of the multinet path outside multinetd's handler.
type stubDaemon struct {
	srv    *cniserver.Server
	obs    *stubObserver
	socket string
	done   chan error
}

func startStub(workDir string) (*stubDaemon, error) {
	socket := filepath.Join(workDir, "stub-multinetd.sock")
	l, err := cniserver.Listen(socket)
	if err != nil {
		return nil, fmt.Errorf("stub daemon: %w", err)
	}
	obs := &stubObserver{}
	s := &stubDaemon{srv: cniserver.New(stubHandler{}, cniserver.Options{Observer: obs}), obs: obs, socket: socket, done: make(chan error, 1)}
	go func() { s.done <- s.srv.Serve(l) }()
	return s, nil
}

// list is the runtime's conflist of the multinet path (the shim, same
// cniVersion) pointed at the stub's socket.
func (s *stubDaemon) list(runtime *libcni.NetworkConfigList) (*libcni.NetworkConfigList, error) {
	var plugin map[string]any
	if err := json.Unmarshal(runtime.Plugins[0].Bytes, &plugin); err != nil {
		return nil, err
	}
	plugin["socketPath"] = s.socket
	b, _ := json.Marshal(map[string]any{"cniVersion": runtime.CNIVersion, "name": runtime.Name, "plugins": []any{plugin}})
	return libcni.ConfListFromBytes(b)
}

func (s *stubDaemon) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	<-s.done
	_ = os.Remove(s.socket)
}

// dialTimes is the connect + request + response of one stub ADD from the
// bench process itself (no exec): the socket's share.
func (s *stubDaemon) dialTimes(n int, netns string) (dist, error) {
	out := make(dist, 0, n)
	req := &api.Request{V: api.Version, Command: api.CmdAdd, ContainerID: newContainerID(), Netns: netns, IfName: "eth0",
		Args: "IgnoreUnknown=1", Path: "/opt/cni/bin", Config: json.RawMessage(`{"cniVersion":"1.0.0","name":"stub","type":"multinet-shim"}`)}
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		start := time.Now()
		_, err := api.Dial(ctx, s.socket, req)
		d := time.Since(start)
		cancel()
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}
