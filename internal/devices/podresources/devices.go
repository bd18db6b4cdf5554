package podresources

import (
	"cmp"
	"slices"
	"strings"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// DeviceIDsOf returns the device IDs of pod keyed by resource name: collected
// over all of pod's containers, deduplicated (kubelet hands devices of init
// containers on to app containers, and reports a device once per NUMA node),
// and sorted in natural order (see naturalCompare). Entries without a resource name or device ID
// are skipped. The map is never nil.
func DeviceIDsOf(pod *podresourcesv1.PodResources) map[string][]string {
	out := map[string][]string{}
	seen := map[[2]string]bool{}
	for _, c := range pod.GetContainers() {
		for _, d := range c.GetDevices() {
			res := d.GetResourceName()
			if res == "" {
				continue
			}
			for _, id := range d.GetDeviceIds() {
				if id == "" || seen[[2]string{res, id}] {
					continue
				}
				seen[[2]string{res, id}] = true
				out[res] = append(out[res], id)
			}
		}
	}
	for _, ids := range out {
		slices.SortFunc(ids, naturalCompare)
	}
	return out
}

// naturalCompare orders strings with runs of decimal digits compared as
// numbers, so "eth2" < "eth10"; other bytes compare as bytes. Equal numbers
// with different leading zeros order the shorter run first, so the order is
// total (0 only for equal strings).
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, nb := a[:da], b[:db]
			ta, tb := trimZeros(na), trimZeros(nb)
			if c := cmp.Or(cmp.Compare(len(ta), len(tb)), strings.Compare(ta, tb), cmp.Compare(len(na), len(nb))); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

// digitRun is the length of the run of ASCII digits at the start of s.
func digitRun(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

func trimZeros(s string) string {
	for len(s) > 1 && s[0] == '0' {
		s = s[1:]
	}
	return s
}
