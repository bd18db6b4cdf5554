package lint

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzDecode: Decode never panics; it returns objects or a *DecodeError that
// names the input, never both; every object is a compact JSON object that
// decodes again, alone, to the same object (so what Lint reads is what the
// manifest said); and Lint accepts whatever Decode returns. The seed corpus
// is in testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		"apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  annotations:\n    k8s.v1.cni.cncf.io/networks: net-a,ns/net-b@eth1\n",
		"kind: A\n---\n---\n# c\n--- # x\nkind: B\n",
		`{"apiVersion":"v1","kind":"List","items":[{"kind":"Pod"},{"kind":"PodList","items":[{}]}]}`,
		"apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata: {name: n}\nspec:\n  config: '{\"cniVersion\":\"1.0.0\",\"type\":\"bridge\"}'\n",
		"apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata: {name: n}\nspec:\n  config: '{\"type\":\"bridge\"}'\n",
		"a: 1\na: 2\n",
		"- x\n",
		"{\"a\":1}\n{\"b\":",
		"kind: List\nitems: [null]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := Decode(data, "in")
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) || !strings.HasPrefix(de.Source, "in") || objs != nil {
				t.Fatalf("Decode = %d objects, %#v; want no objects and a *DecodeError naming the input", len(objs), err)
			}
			return
		}
		for i, o := range objs {
			if !json.Valid(o.JSON) || o.JSON[0] != '{' {
				t.Fatalf("object %d: JSON is not an object: %q", i, o.JSON)
			}
			var c bytes.Buffer
			if err := json.Compact(&c, o.JSON); err != nil || !bytes.Equal(c.Bytes(), o.JSON) {
				t.Fatalf("object %d: JSON is not compact: %q", i, o.JSON)
			}
			again, err := Decode(o.JSON, "again")
			if err != nil || len(again) != 1 {
				t.Fatalf("object %d %s: decoding its JSON again = %d objects, %v", i, o.JSON, len(again), err)
			}
			a := again[0]
			if a.APIVersion != o.APIVersion || a.Kind != o.Kind || a.Namespace != o.Namespace || a.Name != o.Name || a.GenerateName != o.GenerateName || !bytes.Equal(a.JSON, o.JSON) {
				t.Fatalf("object %d changed when decoded again:\n first %+v\nsecond %+v", i, o, a)
			}
		}
		results, err := Lint(objs, Options{})
		if err != nil || len(results) != len(objs) {
			t.Fatalf("Lint = %d results, %v; want %d", len(results), err, len(objs))
		}
		for i, r := range results {
			if r.Errors == nil || r.Warnings == nil || r.Notes == nil || r.Networks == nil || r.Valid != (len(r.Errors) == 0) {
				t.Fatalf("result %d inconsistent: %+v", i, r)
			}
		}
	})
}
