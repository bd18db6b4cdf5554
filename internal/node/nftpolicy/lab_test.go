package nftpolicy_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/multinet/multinet/internal/testing/cnitest"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// refusedAfter is how long a dial or an echo that rules should refuse may
// take before the test takes the packet as dropped; allowedWithin bounds one
// that should go through (a first IPv6 neighbour resolution can cost a TCP
// SYN retransmission, 1 s). Every "refused" check is preceded by the same
// check succeeding without rules, which also resolves the neighbours, so a
// timeout is the rules' doing.
const (
	refusedAfter  = 1 * time.Second
	allowedWithin = 5 * time.Second
)

// lab is two network namespaces, a "server" pod and a "client" pod, joined
// by three veth pairs: net1 and net2 (secondary networks) and eth0 (the
// default network's interface).
type lab struct {
	server, client ns.NetNS
}

// Addresses of the lab: the client has two on net1 so that a rule can tell
// an allowed peer from another one; the server has two so that an egress
// ipBlock except can tell them apart.
var (
	srvNet1  = []string{"10.1.0.1/24", "10.1.0.10/24", "fd00:1::1/64", "fd00:1::10/64"}
	cliNet1  = []string{"10.1.0.2/24", "10.1.0.3/24", "fd00:1::2/64", "fd00:1::3/64"}
	srvNet2  = []string{"10.2.0.1/24"}
	cliNet2  = []string{"10.2.0.2/24"}
	srvEth0  = []string{"10.9.0.1/24", "fd00:9::1/64"}
	cliEth0  = []string{"10.9.0.2/24", "fd00:9::2/64"}
	tcpPorts = []int{8080, 8081, 9000, 9001, 9002}
	udpPort  = 5353
)

func newLab(t *testing.T) *lab {
	t.Helper()
	cnitest.RequireRoot(t)
	l := &lab{server: cnitest.NewNS(t), client: cnitest.NewNS(t)}
	l.veth(t, "net1", srvNet1, cliNet1)
	l.veth(t, "net2", srvNet2, cliNet2)
	l.veth(t, "eth0", srvEth0, cliEth0)
	for _, n := range []ns.NetNS{l.server, l.client} {
		lo, err := cnitest.Handle(t, n).LinkByName("lo")
		if err != nil {
			t.Fatal(err)
		}
		if err := cnitest.Handle(t, n).LinkSetUp(lo); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range tcpPorts {
		l.serveTCP(t, p)
	}
	l.serveUDP(t, udpPort)
	return l
}

// veth joins server and client by a veth pair named name on both sides.
func (l *lab) veth(t *testing.T, name string, srvAddrs, cliAddrs []string) {
	t.Helper()
	hs, hc := cnitest.Handle(t, l.server), cnitest.Handle(t, l.client)
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name, PeerNamespace: netlink.NsFd(int(l.client.Fd()))}
	if err := hs.LinkAdd(v); err != nil {
		t.Fatalf("veth %s: %v", name, err)
	}
	for _, side := range []struct {
		h     *netlink.Handle
		addrs []string
	}{{hs, srvAddrs}, {hc, cliAddrs}} {
		link, err := side.h.LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range side.addrs {
			addr, err := netlink.ParseAddr(a)
			if err != nil {
				t.Fatal(err)
			}
			addr.Flags = unix.IFA_F_NODAD
			if err := side.h.AddrAdd(link, addr); err != nil {
				t.Fatalf("%s %s: %v", name, a, err)
			}
		}
		if err := side.h.LinkSetUp(link); err != nil {
			t.Fatal(err)
		}
	}
}

// serveTCP echoes every connection to port (IPv4 and IPv6) in the server.
func (l *lab) serveTCP(t *testing.T, port int) {
	t.Helper()
	var ln net.Listener
	err := l.server.Do(func(ns.NetNS) error {
		var err error
		ln, err = net.Listen("tcp", fmt.Sprintf(":%d", port))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
}

// serveUDP echoes every datagram to port in the server, with one socket
// per server address so that a reply leaves from the address the datagram
// went to (a connected client socket takes nothing else).
func (l *lab) serveUDP(t *testing.T, port int) {
	t.Helper()
	for _, a := range slices.Concat(srvNet1, srvNet2, srvEth0) {
		addr := netip.MustParsePrefix(a).Addr()
		var pc net.PacketConn
		err := l.server.Do(func(ns.NetNS) error {
			var err error
			pc, err = net.ListenPacket("udp", net.JoinHostPort(addr.String(), fmt.Sprint(port)))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = pc.Close() })
		go echoPackets(pc)
	}
}

func echoPackets(pc net.PacketConn) {
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		_, _ = pc.WriteTo(buf[:n], from)
	}
}

// conn is an open connection from a namespace of the lab.
type conn struct{ net.Conn }

// echo writes msg and reads it back within refusedAfter.
func (c conn) echo(msg string) error {
	return c.echoWithin(msg, allowedWithin)
}

func (c conn) echoWithin(msg string, timeout time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != msg {
		return fmt.Errorf("echo %q, want %q", buf, msg)
	}
	return nil
}

// dial connects from src (an address of from) to dst:port over network
// ("tcp" or "udp"), within allowedWithin.
func dial(from ns.NetNS, network, src, dst string, port int) (conn, error) {
	return dialWithin(from, network, src, dst, port, allowedWithin)
}

func dialWithin(from ns.NetNS, network, src, dst string, port int, timeout time.Duration) (conn, error) {
	var c net.Conn
	err := from.Do(func(ns.NetNS) error {
		local := netip.MustParseAddr(src)
		d := net.Dialer{Timeout: timeout}
		if network == "tcp" {
			d.LocalAddr = &net.TCPAddr{IP: local.AsSlice()}
		} else {
			d.LocalAddr = &net.UDPAddr{IP: local.AsSlice()}
		}
		var err error
		c, err = d.Dial(network, net.JoinHostPort(dst, fmt.Sprint(port)))
		return err
	})
	return conn{c}, err
}

// reach reports whether a connection from src in from to dst:port echoes
// within timeout.
func reach(from ns.NetNS, network, src, dst string, port int, timeout time.Duration) error {
	c, err := dialWithin(from, network, src, dst, port, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.echoWithin("ping", timeout)
}

// flow is one connection attempt and whether rules let it through.
type flow struct {
	from        string // "client" or "server"
	network     string
	src, dst    string
	port        int
	wantAllowed bool
}

func (l *lab) ns(name string) ns.NetNS {
	if name == "server" {
		return l.server
	}
	return l.client
}

// check runs every flow and fails t for each whose outcome is not the
// wanted one.
func (l *lab) check(t *testing.T, stage string, flows []flow) {
	t.Helper()
	for _, f := range flows {
		timeout := refusedAfter
		if f.wantAllowed {
			timeout = allowedWithin
		}
		err := reach(l.ns(f.from), f.network, f.src, f.dst, f.port, timeout)
		switch {
		case f.wantAllowed && err != nil:
			t.Errorf("%s: %s %s %s -> %s:%d: want allowed, got %v", stage, f.from, f.network, f.src, f.dst, f.port, err)
		case !f.wantAllowed && err == nil:
			t.Errorf("%s: %s %s %s -> %s:%d: want refused, it went through", stage, f.from, f.network, f.src, f.dst, f.port)
		case !f.wantAllowed && !isDropped(err):
			t.Errorf("%s: %s %s %s -> %s:%d: want dropped (a timeout, or EPERM for a local UDP send), got %v", stage, f.from, f.network, f.src, f.dst, f.port, err)
		}
	}
}

// allAllowed returns flows with every outcome set to allowed: the baseline
// before rules.
func allAllowed(flows []flow) []flow {
	out := make([]flow, len(flows))
	for i, f := range flows {
		f.wantAllowed = true
		out[i] = f
	}
	return out
}

// isDropped reports whether err is what a dropped packet gives: a timeout,
// or EPERM when the sender's own output hook dropped a UDP datagram.
func isDropped(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EPERM)
}
