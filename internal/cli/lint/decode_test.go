package lint

import (
	"errors"
	"strings"
	"testing"
)

// header is what the decode tests compare of an Object.
type header struct {
	Source, APIVersion, Kind, Namespace, Name string
}

func headers(objs []Object) []header {
	out := make([]header, len(objs))
	for i, o := range objs {
		out[i] = header{o.Source, o.APIVersion, o.Kind, o.Namespace, o.Name}
	}
	return out
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []header
	}{
		{
			name: "YAML stream: documents, blank and comment-only documents skipped, lines of each document",
			in:   "# head\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n---\n# only a comment\n---\n\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b, namespace: ns}\n",
			want: []header{{"f:3", "v1", "Pod", "", "a"}, {"f:12", "v1", "Pod", "ns", "b"}},
		},
		{
			name: "YAML with CRLF line ends and a byte order mark",
			in:   "\xef\xbb\xbfapiVersion: v1\r\nkind: Pod\r\nmetadata:\r\n  name: a\r\n---\r\napiVersion: v1\r\nkind: Pod\r\nmetadata: {name: b}",
			want: []header{{"f:1", "v1", "Pod", "", "a"}, {"f:6", "v1", "Pod", "", "b"}},
		},
		{
			name: "a document separator with a comment",
			in:   "kind: A\n--- # next\nkind: B\n",
			want: []header{{"f:1", "", "A", "", ""}, {"f:3", "", "B", "", ""}},
		},
		{
			name: "JSON stream of two objects, lines of each value",
			in:   "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\"}}\n\n  {\"kind\":\"Pod\",\n\"metadata\":{\"name\":\"b\"}}\nnull\n",
			want: []header{{"f:1", "v1", "Pod", "", "a"}, {"f:3", "", "Pod", "", "b"}},
		},
		{
			name: "kind List is flattened; its items keep their own kind",
			in:   "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: a}}\n- {apiVersion: v1, kind: List, items: [{kind: ConfigMap, apiVersion: v1}]}\n",
			want: []header{{"f:1 items[0]", "v1", "Pod", "", "a"}, {"f:1 items[1] items[0]", "v1", "ConfigMap", "", ""}},
		},
		{
			name: "typed list: items without kind and apiVersion get them from the list",
			in:   `{"apiVersion":"k8s.cni.cncf.io/v1","kind":"NetworkAttachmentDefinitionList","items":[{"metadata":{"name":"n"}},{}]}`,
			want: []header{{"f:1 items[0]", "k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition", "", "n"}, {"f:1 items[1]", "k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition", "", ""}},
		},
		{
			name: "List without items, and a kind ending in List without an items key, which is an object",
			in:   "apiVersion: v1\nkind: List\n---\napiVersion: example.com/v1\nkind: AccessList\nmetadata: {name: x}\n",
			want: []header{{"f:4", "example.com/v1", "AccessList", "", "x"}},
		},
		{
			name: "metadata fields that are not strings are left empty",
			in:   "kind: Pod\nmetadata: {name: 5, namespace: [x]}\n",
			want: []header{{"f:1", "", "Pod", "", ""}},
		},
		{
			name: "empty input",
			in:   "",
			want: []header{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Decode([]byte(tc.in), "f")
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			got := headers(objs)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d objects %+v, want %+v", len(got), got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("object %d: got %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestDecodeJSONIsCompactAndFilled(t *testing.T) {
	objs, err := Decode([]byte("apiVersion: v1\nkind: PodList\nitems:\n- metadata:\n    name: a\n- {}\n"), "f")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"}}`,
		`{"apiVersion":"v1","kind":"Pod"}`,
	}
	for i, o := range objs {
		if string(o.JSON) != want[i] {
			t.Errorf("object %d JSON = %s, want %s", i, o.JSON, want[i])
		}
	}
}

func TestDecodeDuplicateKeys(t *testing.T) {
	objs, err := Decode([]byte("kind: ConfigMap\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  name: b\n"), "f")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs[0].DuplicateKeys) != 0 {
		t.Errorf("first document: unexpected DuplicateKeys %q", objs[0].DuplicateKeys)
	}
	if got := objs[1].DuplicateKeys; len(got) != 1 || got[0] != `line 7: key "name" already set in map` {
		t.Errorf("DuplicateKeys = %q, want the line of the file", got)
	}
	if objs[1].Name != "b" {
		t.Errorf("Name = %q, want the last value b", objs[1].Name)
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		// want is the whole message of the *DecodeError.
		want string
	}{
		{"YAML syntax, line counted from the file's start", "kind: A\n---\nkind: B\nmetadata:\n  name: [x\n", "f:3: YAML: line 5: did not find expected ',' or ']'"},
		{"YAML tab indentation", "kind: A\nmetadata:\n\tname: x\n", "f:1: YAML: line 3: found character that cannot start any token"},
		{"bad document separator", "kind: A\n--- x\nkind: B\n", "f:1: YAML: invalid Yaml document separator: x"},
		{"a scalar document", "kind: A\n---\njust text\n", "f:3: not a Kubernetes object: a string, not a mapping"},
		{"a YAML list document", "- a\n- b\n", "f:1: not a Kubernetes object: a list, not a mapping"},
		{"a top-level JSON array", "[{\"kind\":\"Pod\"}]", "f:1: not a Kubernetes object: a list, not a mapping"},
		{"JSON syntax, line of the offending byte", "{\"kind\":\"Pod\"}\n{\"kind\":\n\"Pod\",,}", "f:3: JSON: invalid character ',' looking for beginning of object key string"},
		{"truncated JSON", "{\"kind\":\"Pod\"", "f:1: JSON: unexpected EOF"},
		{"List items not a list", "kind: List\nitems: {a: b}\n", "f:1: List: field items: a mapping, not a list"},
		{"List item not a mapping", "kind: List\nitems: [{kind: Pod}, 3]\n", "f:1 items[1]: not a Kubernetes object: a number, not a mapping"},
		{"List item null", "kind: List\nitems: [null]\n", "f:1 items[0]: not a Kubernetes object: a null, not a mapping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Decode([]byte(tc.in), "f")
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("Decode = %d objects, %v; want a *DecodeError", len(objs), err)
			}
			if objs != nil {
				t.Errorf("objects returned with an error: %+v", objs)
			}
			if err.Error() != tc.want {
				t.Errorf("error\n got %q\nwant %q", err.Error(), tc.want)
			}
		})
	}
}

func TestDecodeListDepth(t *testing.T) {
	in := strings.Repeat(`{"kind":"List","items":[`, maxListDepth+1) + strings.Repeat("]}", maxListDepth+1)
	if _, err := Decode([]byte(in), "f"); err == nil || !strings.Contains(err.Error(), "nested more than") {
		t.Fatalf("Decode of Lists nested %d deep: %v, want a depth error", maxListDepth+1, err)
	}
	in = strings.Repeat(`{"kind":"List","items":[`, maxListDepth) + `{"kind":"Pod"}` + strings.Repeat("]}", maxListDepth)
	objs, err := Decode([]byte(in), "f")
	if err != nil || len(objs) != 1 || objs[0].Kind != "Pod" {
		t.Fatalf("Decode of Lists nested %d deep = %+v, %v; want the Pod", maxListDepth, objs, err)
	}
}
