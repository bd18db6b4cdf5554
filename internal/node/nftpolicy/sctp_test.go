package nftpolicy_test

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	v1beta2 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1beta2"
	"github.com/multinet/multinet/internal/testing/testskip"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const sctpPort = 7777

// TestNFTPolicySCTP: an SCTP port in a rule lets the allowed peer's associations
// in and drops another peer's. Go's net package has no SCTP: the sockets
// are made with x/sys/unix. Skips (allowed, internal/testing/testskip) on a
// kernel without SCTP.
func TestNFTPolicySCTP(t *testing.T) {
	l := newLab(t)
	if err := l.server.Do(func(ns.NetNS) error { return serveSCTP(t, sctpPort) }); err != nil {
		if errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.ESOCKTNOSUPPORT) {
			testskip.Skip(t, "the kernel has no SCTP (socket: %v)", err)
		}
		t.Fatal(err)
	}
	flows := []struct {
		src  string
		want bool
	}{{"10.1.0.2", true}, {"10.1.0.3", false}}
	for _, f := range flows {
		if err := reachSCTP(l.client, f.src, "10.1.0.1", allowedWithin); err != nil {
			t.Fatalf("no rules: SCTP %s -> 10.1.0.1:%d: %v", f.src, sctpPort, err)
		}
	}
	p := mnp("sctp", "net1", map[string]string{"app": "server"}, v1beta2.MultiNetworkPolicySpec{
		Ingress: []v1beta2.MultiNetworkPolicyIngressRule{{
			From:  []v1beta2.MultiNetworkPolicyPeer{podPeer(map[string]string{"app": "good"})},
			Ports: []v1beta2.MultiNetworkPolicyPort{port(corev1.ProtocolSCTP, intstr.FromInt32(sctpPort), 0)},
		}},
	})
	apply(t, l.server, serverPod, p)
	for _, f := range flows {
		timeout := refusedAfter
		if f.want {
			timeout = allowedWithin
		}
		err := reachSCTP(l.client, f.src, "10.1.0.1", timeout)
		if f.want != (err == nil) {
			t.Errorf("SCTP %s -> 10.1.0.1:%d: want allowed=%v, got %v", f.src, sctpPort, f.want, err)
		}
	}
}

// serveSCTP listens on port (IPv4) in the calling thread's netns and echoes
// every association's first message.
func serveSCTP(t *testing.T, port int) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_SCTP)
	if err != nil {
		return err
	}
	t.Cleanup(func() { _ = unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port}); err != nil {
		return err
	}
	if err := unix.Listen(fd, 16); err != nil {
		return err
	}
	go func() {
		for {
			c, _, err := unix.Accept(fd)
			if err != nil {
				return
			}
			buf := make([]byte, 64)
			if n, err := unix.Read(c, buf); err == nil {
				_, _ = unix.Write(c, buf[:n])
			}
			_ = unix.Close(c)
		}
	}()
	return nil
}

// reachSCTP opens an association from src to dst:sctpPort in n and
// checks an echo, each step within timeout (SO_SNDTIMEO bounds connect,
// SO_RCVTIMEO the read).
func reachSCTP(n ns.NetNS, src, dst string, timeout time.Duration) error {
	return n.Do(func(ns.NetNS) error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_SCTP)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		tv := unix.NsecToTimeval(timeout.Nanoseconds())
		for _, opt := range []int{unix.SO_SNDTIMEO, unix.SO_RCVTIMEO} {
			if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, opt, &tv); err != nil {
				return err
			}
		}
		if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: netip.MustParseAddr(src).As4()}); err != nil {
			return err
		}
		if err := unix.Connect(fd, &unix.SockaddrInet4{Port: sctpPort, Addr: netip.MustParseAddr(dst).As4()}); err != nil {
			return err
		}
		if _, err := unix.Write(fd, []byte("ping")); err != nil {
			return err
		}
		buf := make([]byte, 4)
		if n, err := unix.Read(fd, buf); err != nil || string(buf[:n]) != "ping" {
			return errors.Join(err, errors.New("no echo"))
		}
		return nil
	})
}
