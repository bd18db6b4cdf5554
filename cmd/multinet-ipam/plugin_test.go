package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
)

func TestLoadConfig(t *testing.T) {
	c, err := loadConfig([]byte(`{"ipam":{"type":"multinet-ipam"}}`))
	if err != nil || c.socketPath != defaultSocketPath || c.timeout != defaultTimeout {
		t.Errorf("defaults: %+v, %v", c, err)
	}
	c, err = loadConfig([]byte(`{"ipam":{"type":"multinet-ipam","socketPath":"/x/ipam.sock","timeout":"5s"}}`))
	if err != nil || c.socketPath != "/x/ipam.sock" || c.timeout != 5*time.Second {
		t.Errorf("set: %+v, %v", c, err)
	}
	for stdin, field := range map[string]string{
		`{}`: `"ipam"`,
		`{"ipam":{"socketPath":"run/ipam.sock"}}`: `"ipam.socketPath"`,
		`{"ipam":{"timeout":"soon"}}`:             `"ipam.timeout"`,
		`{"ipam":{"timeout":"-1s"}}`:              `"ipam.timeout"`,
	} {
		_, err := loadConfig([]byte(stdin))
		var cerr *types.Error
		if !errors.As(err, &cerr) || cerr.Code != types.ErrInvalidNetworkConfig || !strings.Contains(cerr.Msg, field) {
			t.Errorf("%s: %v, want code 7 naming %s", stdin, err, field)
		}
	}
}

// Without multinetd, ADD is "try again later" (11) and STATUS "not
// available" (50), both naming the socket.
func TestNoDaemon(t *testing.T) {
	sock := t.TempDir() + "/ipam.sock"
	args := &skel.CmdArgs{ContainerID: "c", Netns: "/var/run/netns/x", IfName: "net1",
		StdinData: []byte(`{"cniVersion":"1.1.0","name":"n","ipam":{"type":"multinet-ipam","socketPath":"` + sock + `","timeout":"1s"}}`)}
	p := plugin{}
	for cmd, want := range map[string]uint{"ADD": types.ErrTryAgainLater, "STATUS": 50} {
		var err error
		if cmd == "ADD" {
			err = p.add(args)
		} else {
			err = p.status(args)
		}
		var cerr *types.Error
		if !errors.As(err, &cerr) || cerr.Code != want || !strings.Contains(cerr.Msg, sock) {
			t.Errorf("%s: %v, want code %d naming the socket", cmd, err, want)
		}
	}
}
