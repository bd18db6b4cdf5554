package nftpolicy

import (
	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/multinet/multinet/pkg/spec/policy"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// Address families as meta nfproto sees them.
const (
	familyIPv4 byte = unix.NFPROTO_IPV4
	familyIPv6 byte = unix.NFPROTO_IPV6
)

func concat(parts ...[]expr.Any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func accept() []expr.Any { return []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}} }

func jump(chain string) []expr.Any {
	return []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: chain}}
}

// ifnameIs matches iifname or oifname (key) equal to name.
func ifnameIs(key expr.MetaKey, name string) []expr.Any {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return []expr.Any{
		&expr.Meta{Key: key, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b},
	}
}

// ctEstablishedOrRelated matches "ct state established,related".
func ctEstablishedOrRelated() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED),
			Xor:  binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{0, 0, 0, 0}},
	}
}

// nfprotoIs matches the address family fam (NFPROTO_IPV4, NFPROTO_IPV6).
func nfprotoIs(fam byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{fam}},
	}
}

// icmpv6TypeIn matches ICMPv6 packets whose type is in set.
func icmpv6TypeIn(set *nftables.Set) []expr.Any {
	return concat(nfprotoIs(familyIPv6), l4protoIs(unix.IPPROTO_ICMPV6), []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
		&expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID},
	})
}

func l4protoIs(proto byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
	}
}

// addrIn matches the source (ingress) or destination (egress) address of
// family fam against set.
func addrIn(set *nftables.Set, fam byte, ingress bool) []expr.Any {
	offset, length := uint32(16), uint32(4) // IPv4 daddr
	switch {
	case fam == familyIPv4 && ingress:
		offset = 12
	case fam == familyIPv6 && ingress:
		offset, length = 8, 16
	case fam == familyIPv6:
		offset, length = 24, 16
	}
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: length},
		&expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID},
	}
}

// protocols maps a policy protocol to its IP protocol number.
var protocols = map[corev1.Protocol]byte{
	corev1.ProtocolTCP:  unix.IPPROTO_TCP,
	corev1.ProtocolUDP:  unix.IPPROTO_UDP,
	corev1.ProtocolSCTP: unix.IPPROTO_SCTP,
}

// portIs matches the protocol of p and its destination port range (TCP,
// UDP and SCTP all have the destination port at offset 2).
func portIs(p policy.Port) []expr.Any {
	out := l4protoIs(protocols[p.Protocol])
	if p.Port == 0 {
		return out
	}
	out = append(out, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2})
	if p.EndPort <= p.Port {
		return append(out, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(p.Port)})
	}
	return append(out, &expr.Range{Op: expr.CmpOpEq, Register: 1,
		FromData: binaryutil.BigEndian.PutUint16(p.Port), ToData: binaryutil.BigEndian.PutUint16(p.EndPort)})
}
