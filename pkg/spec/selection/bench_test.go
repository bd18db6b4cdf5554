package selection

import (
	"strconv"
	"strings"
	"testing"
)

func benchAnnotations(n int) (comma, jsonList string) {
	items := make([]string, n)
	objs := make([]string, n)
	for i := range n {
		items[i] = "net-ns/network-" + strconv.Itoa(i) + "@net" + strconv.Itoa(i+1)
		objs[i] = `{"name":"network-` + strconv.Itoa(i) + `","namespace":"net-ns","interface":"net` + strconv.Itoa(i+1) +
			`","ips":["10.1.` + strconv.Itoa(i) + `.5/24"],"mac":"02:00:00:00:00:0` + strconv.Itoa(i+1) + `"}`
	}
	return strings.Join(items, ","), "[" + strings.Join(objs, ",") + "]"
}

// BenchmarkParse: Parse runs on every pod ADD and every admission.
func BenchmarkParse(b *testing.B) {
	for _, n := range []int{1, 3, 8} {
		comma, js := benchAnnotations(n)
		for _, tc := range []struct{ form, ann string }{{"comma", comma}, {"json", js}} {
			b.Run(tc.form+"/"+strconv.Itoa(n), func(b *testing.B) {
				if _, err := Parse(tc.ann, "pod-ns"); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.SetBytes(int64(len(tc.ann)))
				for b.Loop() {
					_, _ = Parse(tc.ann, "pod-ns")
				}
			})
		}
	}
}

func BenchmarkMarshal(b *testing.B) {
	_, js := benchAnnotations(3)
	elems, err := Parse(js, "pod-ns")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = Marshal(elems)
	}
}
