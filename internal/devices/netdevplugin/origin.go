package netdevplugin

import (
	"fmt"
	"strings"
)

// AliasPrefix starts the interface alias (IFLA_IFALIAS) multinet-netdev gives
// a device while it is in a pod. The alias travels with the device between
// network namespaces, so DEL can restore the device from it even after a
// plugin restart or when the pod's network namespace is gone.
const AliasPrefix = "multinet-orig:"

// maxAliasLen is the longest alias the kernel keeps (IFALIASZ - 1), in bytes.
const maxAliasLen = 255

// origin is what a device looked like in the host network namespace before
// ADD moved it: its name, whether it was administratively up, and the alias it
// had. It is stored in the alias as
//
//	multinet-orig:<name>:<up|down>:<previous alias>
//
// Interface names cannot contain ':' (the kernel rejects them), so the name
// ends at the second ':'; the previous alias is the rest and may contain ':'.
type origin struct {
	Name  string
	Up    bool
	Alias string
}

// encode returns the alias that records o.
func (o origin) encode() string {
	state := "down"
	if o.Up {
		state = "up"
	}
	return AliasPrefix + o.Name + ":" + state + ":" + o.Alias
}

// check reports whether o can be recorded in an alias.
func (o origin) check() error {
	if n := len(o.encode()); n > maxAliasLen {
		return fmt.Errorf("device %s: its alias %q is too long to keep while it is in a pod (%d bytes with our prefix, the kernel keeps %d)",
			o.Name, o.Alias, n, maxAliasLen)
	}
	return nil
}

// parseOrigin reads an alias written by encode. The short form
// "multinet-orig:<name>" (down, no previous alias) is accepted too. ok is
// false for any other alias.
func parseOrigin(alias string) (o origin, ok bool) {
	rest, found := strings.CutPrefix(alias, AliasPrefix)
	if !found {
		return origin{}, false
	}
	name, rest, more := strings.Cut(rest, ":")
	if name == "" {
		return origin{}, false
	}
	o.Name = name
	if !more {
		return o, true
	}
	state, prev, _ := strings.Cut(rest, ":")
	switch state {
	case "up":
		o.Up = true
	case "down":
	default:
		return origin{}, false
	}
	o.Alias = prev
	return o, true
}
