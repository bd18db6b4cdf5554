package status

// Merge returns existing with update applied, for hot-plug (spec §5.1: the
// status of a running pod may be updated). An attachment is identified by its
// "name" and "interface": an update entry replaces the existing entry with the
// same pair in place, and is appended (in update order) otherwise. Neither
// input is modified. The result may need Encode's checks (one default, §5.3.6).
func Merge(existing, update []NetworkStatus) []NetworkStatus {
	out := make([]NetworkStatus, len(existing), len(existing)+len(update))
	copy(out, existing)
	for _, u := range update {
		if i := indexOf(out, u.Name, u.Interface); i >= 0 {
			out[i] = u
			continue
		}
		out = append(out, u)
	}
	return out
}

// Remove returns existing without the entries whose "name" is name and whose
// "interface" is iface (hot-unplug of one attachment). existing is not modified.
func Remove(existing []NetworkStatus, name, iface string) []NetworkStatus {
	out := make([]NetworkStatus, 0, len(existing))
	for _, s := range existing {
		if s.Name == name && s.Interface == iface {
			continue
		}
		out = append(out, s)
	}
	return out
}

func indexOf(list []NetworkStatus, name, iface string) int {
	for i := range list {
		if list[i].Name == name && list[i].Interface == iface {
			return i
		}
	}
	return -1
}
