package nftpolicy

import (
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/multinet/multinet/pkg/spec/policy"
	"go4.org/netipx"
)

// ndTypes are the ICMPv6 types of neighbour discovery (RFC 4861: router
// and neighbour solicitation and advertisement) and multicast listener
// discovery (RFC 3810, RFC 2710), without which IPv6 on the interface stops
// working: they are to IPv6 what ARP is to IPv4, which an IP filter never
// sees.
var ndTypes = []byte{130, 131, 132, 133, 134, 135, 136, 143}

// ndSetName is the set of ndTypes.
const ndSetName = "icmpv6-nd"

// renderer queues one table's messages on a connection.
type renderer struct {
	c      *nftables.Conn
	table  *nftables.Table
	nd     *nftables.Set
	nextID uint32 // set IDs are per batch; the library's own counter is a global without a lock
	stats  Stats
}

// render queues, on c, our table holding the rules for ifaces and an empty
// chain named after digest; replace: the table exists and is deleted first,
// in the same batch. Nothing is sent.
func render(c *nftables.Conn, ifaces []policy.Interface, digest string, replace bool) (Stats, error) {
	r := &renderer{c: c, table: &nftables.Table{Family: nftables.TableFamilyINet, Name: TableName}}
	if replace {
		c.AddTable(r.table) // so that the delete finds one, should it be gone
		c.DelTable(r.table)
	}
	c.AddTable(r.table)
	input := c.AddChain(&nftables.Chain{Name: "input", Table: r.table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter})
	output := c.AddChain(&nftables.Chain{Name: "output", Table: r.table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter})
	c.AddChain(&nftables.Chain{Name: digestPrefix + digest, Table: r.table})
	for _, in := range ifaces {
		if !in.Ingress.Isolated && !in.Egress.Isolated {
			continue
		}
		if err := r.ensureND(); err != nil {
			return Stats{}, err
		}
		if in.Ingress.Isolated {
			if err := r.direction(input, in, in.Ingress, true); err != nil {
				return Stats{}, err
			}
		}
		if in.Egress.Isolated {
			if err := r.direction(output, in, in.Egress, false); err != nil {
				return Stats{}, err
			}
		}
	}
	return r.stats, nil
}

// ensureND adds the set of neighbour discovery types once.
func (r *renderer) ensureND() error {
	if r.nd != nil {
		return nil
	}
	r.nd = &nftables.Set{Table: r.table, Name: ndSetName, ID: r.setID(), KeyType: nftables.TypeICMP6Type}
	var elems []nftables.SetElement
	for _, t := range ndTypes {
		elems = append(elems, nftables.SetElement{Key: []byte{t}})
	}
	r.stats.Sets++
	r.stats.SetElements += len(elems)
	if err := r.c.AddSet(r.nd, elems); err != nil {
		return fmt.Errorf("set %s: %w", ndSetName, err)
	}
	return nil
}

func (r *renderer) setID() uint32 {
	r.nextID++
	return r.nextID
}

func (r *renderer) addRule(ch *nftables.Chain, comment string, exprs ...expr.Any) {
	r.stats.Rules++
	r.c.AddRule(&nftables.Rule{Table: r.table, Chain: ch, Exprs: exprs,
		UserData: userdata.AppendString(nil, userdata.TypeComment, comment)})
}

// direction adds the chain of one direction of one interface and the jump
// to it from base (input or output).
func (r *renderer) direction(base *nftables.Chain, in policy.Interface, d policy.Direction, ingress bool) error {
	name, ifKey := "egress-"+in.Name, expr.MetaKeyOIFNAME
	if ingress {
		name, ifKey = "ingress-"+in.Name, expr.MetaKeyIIFNAME
	}
	ch := r.c.AddChain(&nftables.Chain{Name: name, Table: r.table})
	r.addRule(base, fmt.Sprintf("network %s", in.Network), concat(ifnameIs(ifKey, in.Name), jump(name))...)
	r.addRule(ch, "replies and related packets of allowed connections", concat(ctEstablishedOrRelated(), accept())...)
	r.addRule(ch, "IPv6 neighbour and multicast listener discovery", concat(icmpv6TypeIn(r.nd), accept())...)
	for i, rule := range d.Rules {
		if rule.MatchesNothing() {
			continue
		}
		if err := r.rule(ch, fmt.Sprintf("%s-%d", name, i), rule, ingress); err != nil {
			return err
		}
	}
	r.addRule(ch, "isolated: nothing else", expr.Any(&expr.Verdict{Kind: expr.VerdictDrop}))
	return nil
}

// rule adds the rules accepting what one policy rule allows: one per
// address family of its peers and port.
func (r *renderer) rule(ch *nftables.Chain, setBase string, rule policy.Rule, ingress bool) error {
	addrs, err := r.peerMatches(setBase, rule, ingress)
	if err != nil {
		return err
	}
	ports := [][]expr.Any{nil}
	if !rule.AllPorts {
		ports = ports[:0]
		for _, p := range rule.Ports {
			ports = append(ports, portIs(p))
		}
	}
	comment := fmt.Sprintf("%s/%s %s[%d]", rule.Policy.Namespace, rule.Policy.Name, map[bool]string{true: "ingress", false: "egress"}[ingress], rule.Index)
	for _, a := range addrs {
		for _, p := range ports {
			r.addRule(ch, comment, concat(a, p, accept())...)
		}
	}
	return nil
}

// peerMatches returns the expressions matching the rule's peers: one per
// address family that has peers (none when the rule allows every peer).
func (r *renderer) peerMatches(setBase string, rule policy.Rule, ingress bool) ([][]expr.Any, error) {
	if rule.AllPeers {
		return [][]expr.Any{nil}, nil
	}
	var v4, v6 netipx.IPSetBuilder
	for _, p := range rule.Peers {
		if p.Addr().Is4() {
			v4.AddPrefix(p)
		} else {
			v6.AddPrefix(p)
		}
	}
	var out [][]expr.Any
	for _, fam := range []struct {
		b    *netipx.IPSetBuilder
		ipv6 bool
	}{{&v4, false}, {&v6, true}} {
		m, err := r.addrMatch(setBase, fam.b, fam.ipv6, ingress)
		if err != nil {
			return nil, err
		}
		if m != nil {
			out = append(out, m)
		}
	}
	return out, nil
}

// addrMatch returns the expressions matching a source (ingress) or
// destination (egress) address of one family in b, through an interval set;
// nil when b is empty.
func (r *renderer) addrMatch(setBase string, b *netipx.IPSetBuilder, ipv6, ingress bool) ([]expr.Any, error) {
	set, err := b.IPSet()
	if err != nil || len(set.Ranges()) == 0 {
		return nil, err
	}
	fam, keyType, suffix := familyIPv4, nftables.TypeIPAddr, "-v4"
	if ipv6 {
		fam, keyType, suffix = familyIPv6, nftables.TypeIP6Addr, "-v6"
	}
	if whole(set, ipv6) {
		return nfprotoIs(fam), nil
	}
	s := &nftables.Set{Table: r.table, Name: setBase + suffix, ID: r.setID(), KeyType: keyType, Interval: true}
	elems := intervalElements(set.Ranges())
	r.stats.Sets++
	r.stats.SetElements += len(elems)
	if err := r.c.AddSet(s, elems); err != nil {
		return nil, fmt.Errorf("set %s: %w", s.Name, err)
	}
	return concat(nfprotoIs(fam), addrIn(s, fam, ingress)), nil
}

// whole reports whether set is every address of its family.
func whole(set *netipx.IPSet, ipv6 bool) bool {
	all := netip.MustParsePrefix("0.0.0.0/0")
	if ipv6 {
		all = netip.MustParsePrefix("::/0")
	}
	return set.ContainsPrefix(all)
}

// intervalElements turns address ranges into interval set elements: the
// first address of each range, and the address after its last flagged as
// an interval end (left out when the range reaches the family's last
// address, as nft does).
func intervalElements(ranges []netipx.IPRange) []nftables.SetElement {
	var out []nftables.SetElement
	for _, rg := range ranges {
		out = append(out, nftables.SetElement{Key: rg.From().AsSlice()})
		if next := rg.To().Next(); next.IsValid() {
			out = append(out, nftables.SetElement{Key: next.AsSlice(), IntervalEnd: true})
		}
	}
	return out
}
