package main

import (
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/multinet/multinet/internal/node/cniserver/api"
)

func TestLoadConfig(t *testing.T) {
	noEnv := func(string) string { return "" }
	c, err := loadConfig([]byte(`{"ipam":{"type":"multinet-ipam"}}`), noEnv)
	if err != nil || c.socketPath != api.DefaultIPAMSocketPath || c.timeout != defaultTimeout {
		t.Errorf("defaults: %+v, %v", c, err)
	}
	env := func(k string) string {
		if k == api.IPAMSocketEnv {
			return "/x/ipam.sock"
		}
		return ""
	}
	c, err = loadConfig([]byte(`{"ipam":{"type":"multinet-ipam","timeout":"5s"}}`), env)
	if err != nil || c.socketPath != "/x/ipam.sock" || c.timeout != 5*time.Second {
		t.Errorf("set: %+v, %v", c, err)
	}
	for stdin, field := range map[string]string{
		`{}`:                          `"ipam"`,
		`{"ipam":{"timeout":"soon"}}`: `"ipam.timeout"`,
		`{"ipam":{"timeout":"-1s"}}`:  `"ipam.timeout"`,
	} {
		_, err := loadConfig([]byte(stdin), noEnv)
		var cerr *types.Error
		if !errors.As(err, &cerr) || cerr.Code != types.ErrInvalidNetworkConfig || !strings.Contains(cerr.Msg, field) {
			t.Errorf("%s: %v, want code 7 naming %s", stdin, err, field)
		}
	}
	rel := func(string) string { return "run/ipam.sock" }
	var cerr *types.Error
	if _, err := loadConfig([]byte(`{"ipam":{}}`), rel); !errors.As(err, &cerr) || cerr.Code != types.ErrInvalidEnvironmentVariables || !strings.Contains(cerr.Msg, api.IPAMSocketEnv) {
		t.Errorf("relative %s: %v, want code 6 naming it", api.IPAMSocketEnv, err)
	}
}

// A network configuration (a NAD) cannot choose the socket: "ipam.socketPath"
// naming multinetd's CNI socket (or any path, even the right one) is
// refused with the key named, and nothing is dialled.
func TestNADSocketPathRefused(t *testing.T) {
	// A server that would answer, to show the plugin never dials it.
	sock := filepath.Join(t.TempDir(), "multinetd.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dialled := make(chan struct{}, 1)
	go func() {
		if c, err := l.Accept(); err == nil {
			dialled <- struct{}{}
			_ = c.Close()
		}
	}()
	t.Setenv(api.IPAMSocketEnv, filepath.Join(t.TempDir(), "ipam.sock"))
	for _, p := range []string{sock, api.DefaultSocketPath, ""} {
		args := &skel.CmdArgs{ContainerID: "c", Netns: "/var/run/netns/x", IfName: "net1",
			StdinData: []byte(`{"cniVersion":"1.1.0","name":"n","ipam":{"type":"multinet-ipam","socketPath":"` + p + `","timeout":"1s"}}`)}
		for _, cmd := range []string{"ADD", "GC"} {
			var err error
			if cmd == "ADD" {
				err = plugin{}.add(args)
			} else {
				err = plugin{}.gc(args)
			}
			var cerr *types.Error
			if !errors.As(err, &cerr) || cerr.Code != types.ErrInvalidNetworkConfig || !strings.Contains(cerr.Msg, `"ipam.socketPath"`) || !strings.Contains(cerr.Msg, "node configuration") {
				t.Errorf("%s with socketPath %q: %v, want code 7 refusing \"ipam.socketPath\"", cmd, p, err)
			}
		}
	}
	select {
	case <-dialled:
		t.Error("the plugin dialled the socket a network configuration named")
	default:
	}
}

// Without multinetd, ADD is "try again later" (11) and STATUS "not
// available" (50), both naming the socket.
func TestNoDaemon(t *testing.T) {
	sock := t.TempDir() + "/ipam.sock"
	t.Setenv(api.IPAMSocketEnv, sock)
	args := &skel.CmdArgs{ContainerID: "c", Netns: "/var/run/netns/x", IfName: "net1",
		StdinData: []byte(`{"cniVersion":"1.1.0","name":"n","ipam":{"type":"multinet-ipam","timeout":"1s"}}`)}
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
