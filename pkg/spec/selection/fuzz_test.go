package selection

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzParse: Parse never panics, and whatever it accepts survives
// Marshal and Parse unchanged (spec §4.1: both formats describe the same
// elements). The seed corpus is in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"",
		"net-a,net-b,other-ns/net-c",
		"net-a@eth1, ns/net-b@net2",
		"net-a,net-a",
		`net1@"eth0"`, `'ns'/net-a`, "\"net-a@eth1\"",
		`[{"name":"net-b","ips":["10.2.2.42/24","2001:db8::5/64"]}]`,
		`[{"name":"net-b","mac":"02:23:45:67:89:01","interface":"eth1"}]`,
		`[{"name":"net-b","cni-args":{"foo":"bar","n":1e400}}]`,
		`[{"name":"net-b","portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"UDP"}]}]`,
		`[{"name":"net-b","bandwidth":{"ingressRate":2048,"ingressBurst":1600}}]`,
		`[{"name":"net-a"},{"name":"net-b","default-route":[]}]`,
		`[{"name":"net-b","infiniband-guid":"24:8a:07:03:00:8d:ae:2f","ipam-claim-reference":"vm-a.net-b"}]`,
		`[{"name":"n","org.example.k":{"a":["<>",1.0]}}]`,
		`{"name":"x"}`,
	} {
		f.Add(s, "pod-ns")
	}
	f.Fuzz(func(t *testing.T, annotation, podNS string) {
		x, err := Parse(annotation, podNS)
		if err != nil {
			if x != nil {
				t.Fatalf("Parse returned elements and an error %v", err)
			}
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		s, err := Marshal(x)
		if err != nil {
			t.Fatalf("Marshal(Parse(%q)) failed: %v", annotation, err)
		}
		y, err := Parse(s, podNS)
		if err != nil {
			t.Fatalf("Parse(Marshal(x)) failed: %v\nannotation %q\nmarshalled %s", err, annotation, s)
		}
		if !reflect.DeepEqual(x, y) {
			t.Fatalf("round trip changed the elements\nannotation %q\nmarshalled %s\n x %#v\n y %#v", annotation, s, x, y)
		}
		// ParseDefaultNetwork must not panic on the same input either.
		_, _ = ParseDefaultNetwork(annotation, podNS)
	})
}

// FuzzScan: the allocation-free walk of scan.go agrees with encoding/json
// on every valid JSON text: same members (last one wins in encoding/json,
// so only texts without repeated keys are compared) and same array items.
func FuzzScan(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, ` { "a" : 1 , "b" : [ "x" , { "c" : null } ] } `,
		`{"k\"ey":"v\\","\u0041":"\u00e9","e":-1.5e+10,"t":true,"f":false}`,
		`[1,"2",[3],{"4":4},null]`, `"str"`, `12`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := []byte(s)
		// The helpers must not panic on any input.
		_ = members(b, nil)
		_ = items(b, nil)
		if !json.Valid(b) {
			return
		}
		switch kindOf(b) {
		case "object":
			var want map[string]json.RawMessage
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			got := members(b, nil)
			if _, dup := got.duplicateKey(); dup {
				return
			}
			if len(got) != len(want) {
				t.Fatalf("members: %d, encoding/json: %d", len(got), len(want))
			}
			for _, m := range got {
				w, ok := want[string(m.key)]
				if !ok || !bytes.Equal(m.val, w) {
					t.Fatalf("member %q = %q, encoding/json %q (present %v)", m.key, m.val, w, ok)
				}
			}
		case "array":
			var want []json.RawMessage
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			got := items(b, nil)
			if len(got) != len(want) {
				t.Fatalf("items: %d, encoding/json: %d", len(got), len(want))
			}
			for i := range got {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("item %d = %q, encoding/json %q", i, got[i], want[i])
				}
			}
		}
	})
}
