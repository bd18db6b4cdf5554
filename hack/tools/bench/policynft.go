package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/google/nftables"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/multinet/multinet/internal/node/nftpolicy"
)

// tableState is multinetd's nftables table (family inet,
// nftpolicy.TableName) in a sandbox's network namespace, as the bench reads
// it through netlink.
type tableState struct {
	present  bool
	rules    int // rules in the table's chains
	elements int // elements of the table's sets
	// fingerprint changes whenever the table's chains, rules or set
	// elements do (a hash of them); "" without a table.
	fingerprint string
}

// readTable reads multinetd's table in the network namespace at nsPath.
// Its chains, rules and sets are read with several netlink requests, so
// multinetd may replace or remove the table in between (ENOENT): the read
// starts over, a few times.
func readTable(nsPath string) (tableState, error) {
	var err error
	for range 5 {
		var st tableState
		if st, err = readTableOnce(nsPath); !gone(err) {
			return st, err
		}
	}
	return tableState{}, err
}

// gone reports whether err says that an object read went away (ENOENT;
// google/nftables formats some netlink errors with %v, so the text is
// checked too).
func gone(err error) bool {
	return err != nil && (errors.Is(err, unix.ENOENT) || strings.Contains(err.Error(), unix.ENOENT.Error()))
}

// readTableOnce is one read of readTable.
func readTableOnce(nsPath string) (tableState, error) {
	ns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return tableState{}, fmt.Errorf("netns %s: %w", nsPath, err)
	}
	defer ns.Close()
	conn, err := nftables.New(nftables.WithNetNSFd(int(ns)))
	if err != nil {
		return tableState{}, fmt.Errorf("netns %s: nftables: %w", nsPath, err)
	}
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return tableState{}, fmt.Errorf("netns %s: list tables: %w", nsPath, err)
	}
	var table *nftables.Table
	for _, t := range tables {
		if t.Name == nftpolicy.TableName {
			table = t
		}
	}
	if table == nil {
		return tableState{}, nil
	}
	st, err := tableContent(conn, table)
	if err != nil {
		return tableState{}, fmt.Errorf("netns %s: table inet %s: %w", nsPath, table.Name, err)
	}
	return st, nil
}

// tableContent counts and hashes table's chains, rules and set elements.
func tableContent(conn *nftables.Conn, table *nftables.Table) (tableState, error) {
	st := tableState{present: true}
	h := sha256.New()
	chains, err := conn.ListChainsOfTableFamily(table.Family)
	if err != nil {
		return st, err
	}
	for _, ch := range chains {
		if ch.Table == nil || ch.Table.Name != table.Name {
			continue
		}
		rules, err := conn.GetRules(table, ch)
		if err != nil {
			return st, fmt.Errorf("chain %s: %w", ch.Name, err)
		}
		st.rules += len(rules)
		fmt.Fprintf(h, "chain %s\n", ch.Name)
		for _, r := range rules {
			for _, e := range r.Exprs {
				fmt.Fprintf(h, "%T%+v;", e, e)
			}
			h.Write(r.UserData)
			h.Write([]byte{'\n'})
		}
	}
	sets, err := conn.GetSets(table)
	if err != nil {
		return st, err
	}
	for _, s := range sets {
		elems, err := conn.GetSetElements(s)
		if err != nil {
			return st, fmt.Errorf("set %s: %w", s.Name, err)
		}
		st.elements += len(elems)
		fmt.Fprintf(h, "set %s\n", s.Name)
		for _, e := range elems {
			fmt.Fprintf(h, "%x-%x-%v;", e.Key, e.KeyEnd, e.IntervalEnd)
		}
	}
	st.fingerprint = hex.EncodeToString(h.Sum(nil))
	return st, nil
}
