// Package nftpolicy enforces the effective MultiNetworkPolicy rules of a pod
// (pkg/spec/policy) with nftables in the pod's network namespace: one table
// of ours (inet multinet) with chains hooked on input and output that filter
// only the listed interfaces (iifname/oifname), so eth0 and the interfaces
// of other networks are untouched. Packets of established and related
// connections are always accepted, so replacing the rules never cuts a
// connection. It talks netlink directly (github.com/google/nftables): the
// node image has no nft binary.
//
// Apply replaces the whole table in one netlink transaction (atomic) and
// writes nothing when the table already holds the same rules (idempotent).
package nftpolicy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"github.com/multinet/multinet/pkg/spec/policy"
	"golang.org/x/sys/unix"
)

// TableName is the name of our table (family inet) in each pod's network
// namespace.
const TableName = "multinet"

// digestPrefix starts the name of the empty chain whose name records what
// the table was made from (a digest of Apply's input and this package's
// rendering version).
const digestPrefix = "digest-"

// renderVersion changes whenever the rendering of the same input changes,
// so that Apply rewrites tables an older multinetd wrote.
const renderVersion = "1"

// Stats says what Apply did.
type Stats struct {
	// Changed is false when the table already held exactly these rules and
	// nothing was written.
	Changed bool
	// Rules is the number of rules in the table, Sets of address sets and
	// SetElements of their elements (an address range is two).
	Rules, Sets, SetElements int
	// Digest is what the table records of its input (Digest's value).
	Digest string
}

// Apply makes our table in the network namespace at netnsPath (e.g.
// /var/run/netns/x or /proc/PID/ns/net) hold exactly the rules for ifaces:
// for each interface isolated in a direction, traffic in that direction is
// accepted when it is part of an established or related connection, is IPv6
// neighbour discovery, or matches one of the direction's rules, and dropped
// otherwise. Interfaces not in ifaces are not filtered; an empty ifaces
// leaves an empty table. The old table is replaced in the same netlink
// transaction. The ctx deadline bounds the netlink calls.
//
// Errors: an invalid interface name (nothing is written), a netns that
// cannot be opened, netlink errors (the transaction is all or nothing).
func Apply(ctx context.Context, netnsPath string, ifaces []policy.Interface) (Stats, error) {
	for _, in := range ifaces {
		if err := checkIfname(in.Name); err != nil {
			return Stats{}, err
		}
	}
	digest, err := Digest(ifaces)
	if err != nil {
		return Stats{}, err
	}
	c, closeConn, err := open(ctx, netnsPath)
	if err != nil {
		return Stats{}, err
	}
	// Closing an nftables socket waits for the kernel to free what the
	// last transaction replaced (an RCU grace period, milliseconds): the
	// rules are in place once Flush returns, so the close does not hold
	// up the caller (an ADD).
	defer func() { go closeConn() }()
	current, exists, err := currentDigest(c)
	if err != nil {
		return Stats{}, fmt.Errorf("netns %s: reading table inet %s: %w", netnsPath, TableName, err)
	}
	stats, err := render(c, ifaces, digest, exists)
	if err != nil {
		return Stats{}, fmt.Errorf("netns %s: %w", netnsPath, err)
	}
	stats.Digest = digest
	if current == digest {
		return stats, nil // the messages rendered are never sent
	}
	if err := c.Flush(); err != nil {
		return Stats{}, fmt.Errorf("netns %s: writing table inet %s: %w", netnsPath, TableName, err)
	}
	stats.Changed = true
	return stats, nil
}

// errNotNetns: the path opened is not a network namespace (a file the
// runtime left after unmounting the namespace, for one).
var errNotNetns = errors.New("not a network namespace")

// Remove deletes our table from the network namespace at netnsPath. A
// table or network namespace that does not exist (no file, or a file that
// is no longer a network namespace) is no error.
func Remove(ctx context.Context, netnsPath string) error {
	c, closeConn, err := open(ctx, netnsPath)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, errNotNetns) {
		return nil
	}
	if err != nil {
		return err
	}
	defer func() { go closeConn() }() // as in Apply
	t := &nftables.Table{Family: nftables.TableFamilyINet, Name: TableName}
	c.AddTable(t) // adding an existing table is no error: the delete never fails on a missing one
	c.DelTable(t)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("netns %s: deleting table inet %s: %w", netnsPath, TableName, err)
	}
	return nil
}

// open returns a lasting nftables connection into the network namespace at
// path whose socket has ctx's deadline, and a function closing it.
func open(ctx context.Context, path string) (*nftables.Conn, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("opening netns: %w", err)
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &fs); err != nil || fs.Type != unix.NSFS_MAGIC {
		_ = f.Close()
		return nil, nil, fmt.Errorf("netns %s: %w", path, errNotNetns)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Time{}
	}
	c, err := nftables.New(nftables.WithNetNSFd(int(f.Fd())), nftables.AsLasting(),
		nftables.WithSockOptions(func(nc *netlink.Conn) error { return nc.SetDeadline(deadline) }))
	if err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("netns %s: netlink: %w", path, err)
	}
	return c, func() { _ = c.CloseLasting(); _ = f.Close() }, nil
}

// currentDigest returns the digest our table records ("" when none) and
// whether the table exists.
func currentDigest(c *nftables.Conn) (digest string, exists bool, err error) {
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return "", false, err
	}
	for _, ch := range chains {
		if ch.Table == nil || ch.Table.Name != TableName {
			continue
		}
		exists = true
		if strings.HasPrefix(ch.Name, digestPrefix) {
			return strings.TrimPrefix(ch.Name, digestPrefix), true, nil
		}
	}
	if !exists {
		tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
		if err != nil {
			return "", false, err
		}
		exists = slices.ContainsFunc(tables, func(t *nftables.Table) bool { return t.Name == TableName })
	}
	return "", exists, nil
}

// Digest returns what Apply records in the table it writes for ifaces: a
// digest of ifaces and the rendering version, 24 hex digits (so that the
// chain name stays within the oldest kernels' 32 bytes). Two calls with
// equal ifaces give the same digest; a table recording it holds exactly
// their rules. Errors: ifaces cannot be encoded.
func Digest(ifaces []policy.Interface) (string, error) {
	b, err := json.Marshal(struct {
		Version string
		Ifaces  []policy.Interface
	}{renderVersion, ifaces})
	if err != nil {
		return "", fmt.Errorf("digest of the rules: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12]), nil
}

// checkIfname refuses a name that cannot be a Linux interface name.
func checkIfname(name string) error {
	if name == "" || len(name) >= unix.IFNAMSIZ || strings.ContainsAny(name, "/ \t\n\x00:") {
		return fmt.Errorf("interface name %q: want 1 to %d bytes without '/', ':' or blanks", name, unix.IFNAMSIZ-1)
	}
	return nil
}
