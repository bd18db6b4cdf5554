package lint

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
)

func reportInput(t *testing.T) []Result {
	return lintYAML(t, nad("", "disk", "")+
		pod("", "web", "disk,disk")+
		pod("", "bad", `[{"name":"disk","mac":"zz"}]`)+
		"apiVersion: v1\nkind: Pod\nmetadata: {generateName: gen-}\n---\n"+
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: x}\n", Options{})
}

func TestWriteText(t *testing.T) {
	rs := reportInput(t)
	// The lines after the valid pod are the same with and without notes.
	const tail = `invalid  Pod default/bad (in.yaml:15)
    metadata.annotations["k8s.v1.cni.cncf.io/networks"]: networks[0] "disk": field "mac": "zz" is not a 6-byte MAC address (spec §4.1.2.1.4)
ok  Pod default/gen-* (0 networks)
skipped  ConfigMap x/c
5 objects: 3 valid, 1 invalid, 1 skipped
`
	const diskNote = `    note: metadata.annotations["k8s.v1.cni.cncf.io/networks"]: networks[%d] "disk": NetworkAttachmentDefinition default/disk has no spec.config: multinetd uses the CNI config named "disk" in the node's CNI conf dir (spec §3.4.1), which is not visible here; its capabilities are not checked
`
	for _, tc := range []struct {
		notes bool
		want  string
	}{
		{false, "ok  NetworkAttachmentDefinition default/disk (1 note)\nok  Pod default/web (2 networks, 2 notes)\n" + tail},
		{true, `ok  NetworkAttachmentDefinition default/disk
    note: spec.config: not set: the node's CNI config whose "name" is "disk" is used (spec §3.2.4, §3.4.1 rules 2-3); it is not checked here
ok  Pod default/web (2 networks)
` + fmt.Sprintf(diskNote, 0) + fmt.Sprintf(diskNote, 1) + tail},
	} {
		var b bytes.Buffer
		if err := WriteText(&b, rs, tc.notes); err != nil {
			t.Fatal(err)
		}
		if b.String() != tc.want {
			t.Errorf("WriteText(notes=%v):\n%s\nwant:\n%s", tc.notes, b.String(), tc.want)
		}
	}
	if !Invalid(rs) {
		t.Error("Invalid = false with an invalid result")
	}
	if Invalid(rs[:2]) {
		t.Error("Invalid = true for valid results")
	}
}

// TestWriteTextWarnings: warnings are printed with and without notes, under
// their object, and counted in the summary; they leave the object valid.
func TestWriteTextWarnings(t *testing.T) {
	rs := lintYAML(t, nad("", "old", `{"type":"bridge"}`)+nad("", "new", `{"cniVersion":"1.0.0","type":"bridge"}`), Options{})
	const want = `ok  NetworkAttachmentDefinition default/old
    warning: spec.config: field cniVersion: missing: the plugins run it as CNI 0.1.0, as libcni does (no CHECK, results without interfaces); set the version the plugins implement, e.g. "1.0.0"
ok  NetworkAttachmentDefinition default/new
2 objects: 2 valid, 0 invalid, 0 skipped, 1 warning
`
	for _, notes := range []bool{false, true} {
		var b bytes.Buffer
		if err := WriteText(&b, rs, notes); err != nil {
			t.Fatal(err)
		}
		if b.String() != want {
			t.Errorf("WriteText(notes=%v):\n%s\nwant:\n%s", notes, b.String(), want)
		}
	}
	if Invalid(rs) {
		t.Error("Invalid = true: a warning must not make an object invalid")
	}
}

// TestWriteJSON: one entry per checked object, skipped objects left out,
// errors, notes and networks always lists (never null).
func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, reportInput(t)); err != nil {
		t.Fatal(err)
	}
	var got []map[string]json.RawMessage
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("output is not a JSON list: %v\n%s", err, b.String())
	}
	if len(got) != 4 {
		t.Fatalf("got %d entries, want 4 (the ConfigMap left out):\n%s", len(got), b.String())
	}
	wantKeys := []string{"kind", "namespace", "name", "source", "valid", "errors", "warnings", "notes", "networks"}
	for i, e := range got {
		if len(e) != len(wantKeys) {
			t.Errorf("entry %d has keys %v, want %v", i, keysOf(e), wantKeys)
		}
		for _, k := range []string{"errors", "warnings", "notes", "networks"} {
			if v := e[k]; len(v) == 0 || v[0] != '[' {
				t.Errorf("entry %d: %q = %s, want a list", i, k, v)
			}
		}
	}
	if string(got[0]["networks"]) != "[]" || string(got[1]["valid"]) != "true" || string(got[2]["valid"]) != "false" {
		t.Errorf("unexpected entries:\n%s", b.String())
	}
	var nets []map[string]any
	if err := json.Unmarshal(got[1]["networks"], &nets); err != nil || len(nets) != 2 || nets[1]["interface"] != "net2" || nets[1]["namespace"] != "default" {
		t.Errorf("web networks = %s (%v), want two elements with namespace and interface", got[1]["networks"], err)
	}

	b.Reset()
	if err := WriteJSON(&b, nil); err != nil || b.String() != "[]\n" {
		t.Errorf("WriteJSON(nil) = %q, %v; want []", b.String(), err)
	}
}

func keysOf(m map[string]json.RawMessage) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
