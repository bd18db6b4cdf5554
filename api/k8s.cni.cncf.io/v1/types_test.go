package v1_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation"

	v1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
)

func newCodecs(t *testing.T) (*runtime.Scheme, serializer.CodecFactory) {
	t.Helper()
	s := runtime.NewScheme()
	if err := v1.AddToScheme(s); err != nil {
		t.Fatalf("AddToScheme: %v", err)
	}
	return s, serializer.NewCodecFactory(s)
}

// The YAML examples of spec §3.2 decode into the Go types (§3.1).
func TestDecodeSpecExamples(t *testing.T) {
	_, codecs := newCodecs(t)
	tests := []struct {
		section    string
		yaml       string
		wantName   string
		wantConfig string // substring of spec.config; "" means spec.config is empty
	}{
		{
			section: "§3.2.1 CNI config JSON in object",
			yaml: `apiVersion: "k8s.cni.cncf.io/v1"
kind: NetworkAttachmentDefinition
metadata:
  name: a-bridge-network
spec:
  config: '{
    "cniVersion": "0.3.0",
    "name": "a-bridge-network",
    "type": "bridge",
    "bridge": "br0",
    "isGateway": true,
    "ipam": {
      "type": "host-local",
      "subnet": "192.168.5.0/24",
      "dataDir": "/mnt/cluster-ipam"
    }
}'
`,
			wantName:   "a-bridge-network",
			wantConfig: `"type": "bridge"`,
		},
		{
			section: "§3.2.3 limited CNI config (thick plugin)",
			yaml: `apiVersion: "k8s.cni.cncf.io/v1"
kind: NetworkAttachmentDefinition
metadata:
   name: a-bridge-network
spec:
   config: '{
      "cniVersion": "0.3.0",
      "type": "awesome-plugin"
}'
`,
			wantName:   "a-bridge-network",
			wantConfig: `"type": "awesome-plugin"`,
		},
		{
			section: "§3.2.4 implementation-specific network reference (no spec)",
			yaml: `apiVersion: "k8s.cni.cncf.io/v1"
kind: NetworkAttachmentDefinition
metadata:
  name: a-bridge-network
`,
			wantName: "a-bridge-network",
		},
	}
	for _, tt := range tests {
		t.Run(tt.section, func(t *testing.T) {
			obj, gvk, err := codecs.UniversalDeserializer().Decode([]byte(tt.yaml), nil, nil)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			want := schema.GroupVersionKind{Group: "k8s.cni.cncf.io", Version: "v1", Kind: "NetworkAttachmentDefinition"}
			if *gvk != want {
				t.Errorf("gvk = %v, want %v", gvk, want)
			}
			nad, ok := obj.(*v1.NetworkAttachmentDefinition)
			if !ok {
				t.Fatalf("decoded %T, want *NetworkAttachmentDefinition", obj)
			}
			if nad.Name != tt.wantName {
				t.Errorf("name = %q, want %q", nad.Name, tt.wantName)
			}
			switch {
			case tt.wantConfig == "" && nad.Spec.Config != "":
				t.Errorf("spec.config = %q, want empty", nad.Spec.Config)
			case tt.wantConfig != "" && !strings.Contains(nad.Spec.Config, tt.wantConfig):
				t.Errorf("spec.config = %q, want it to contain %q", nad.Spec.Config, tt.wantConfig)
			}
		})
	}
}

// On the wire, an empty spec.config is omitted (§3.1 "config,omitempty"), and
// the object round-trips through the scheme's codec unchanged.
func TestEncodeRoundTrip(t *testing.T) {
	_, codecs := newCodecs(t)
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		t.Fatal("no JSON serializer")
	}
	enc := codecs.EncoderForVersion(info.Serializer, v1.SchemeGroupVersion)
	dec := codecs.UniversalDeserializer()
	tests := []struct {
		name       string
		nad        *v1.NetworkAttachmentDefinition
		wantSubstr string
		notSubstr  string
	}{
		{
			name: "with config",
			nad: &v1.NetworkAttachmentDefinition{
				ObjectMeta: metav1.ObjectMeta{Name: "net-a", Namespace: "ns1",
					Annotations: map[string]string{v1.ResourceNameAnnotation: "example.com/pool"}},
				Spec: v1.NetworkAttachmentDefinitionSpec{Config: `{"cniVersion":"1.0.0","type":"bridge"}`},
			},
			wantSubstr: `"config":"{\"cniVersion\":\"1.0.0\",\"type\":\"bridge\"}"`,
		},
		{
			name:       "without config",
			nad:        &v1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Name: "net-b", Namespace: "ns1"}},
			wantSubstr: `"spec":{}`,
			notSubstr:  `"config"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := runtime.Encode(enc, tt.nad)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			s := string(data)
			if !strings.Contains(s, `"apiVersion":"k8s.cni.cncf.io/v1"`) || !strings.Contains(s, `"kind":"NetworkAttachmentDefinition"`) {
				t.Errorf("encoded %s: missing apiVersion/kind", s)
			}
			if !strings.Contains(s, tt.wantSubstr) {
				t.Errorf("encoded %s: want %s", s, tt.wantSubstr)
			}
			if tt.notSubstr != "" && strings.Contains(s, tt.notSubstr) {
				t.Errorf("encoded %s: must not contain %s", s, tt.notSubstr)
			}
			back, err := runtime.Decode(dec, data)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			got := back.(*v1.NetworkAttachmentDefinition)
			got.TypeMeta = metav1.TypeMeta{}
			if !equality.Semantic.DeepEqual(got, tt.nad) {
				t.Errorf("round trip:\n got %+v\nwant %+v", got, tt.nad)
			}
		})
	}
}

func TestSchemeRegistration(t *testing.T) {
	s, _ := newCodecs(t)
	for _, obj := range []runtime.Object{&v1.NetworkAttachmentDefinition{}, &v1.NetworkAttachmentDefinitionList{}} {
		gvks, _, err := s.ObjectKinds(obj)
		if err != nil {
			t.Fatalf("ObjectKinds(%T): %v", obj, err)
		}
		if len(gvks) != 1 || gvks[0].GroupVersion() != v1.SchemeGroupVersion {
			t.Errorf("ObjectKinds(%T) = %v, want one kind in %v", obj, gvks, v1.SchemeGroupVersion)
		}
	}
	// Option types for query parameters are registered in the group version.
	if !s.Recognizes(v1.SchemeGroupVersion.WithKind("ListOptions")) {
		t.Error("ListOptions not registered in k8s.cni.cncf.io/v1")
	}
	if got, want := v1.Resource(v1.NetworkAttachmentDefinitionResource).String(), "network-attachment-definitions.k8s.cni.cncf.io"; got != want {
		t.Errorf("Resource() = %q, want %q (the CRD name, §3.1)", got, want)
	}
	if got, want := v1.Kind(v1.NetworkAttachmentDefinitionKind).String(), "NetworkAttachmentDefinition.k8s.cni.cncf.io"; got != want {
		t.Errorf("Kind() = %q, want %q", got, want)
	}
}

func TestDeepCopyIsIndependent(t *testing.T) {
	orig := &v1.NetworkAttachmentDefinitionList{Items: []v1.NetworkAttachmentDefinition{{
		ObjectMeta: metav1.ObjectMeta{Name: "net-a", Annotations: map[string]string{"a": "1"}},
		Spec:       v1.NetworkAttachmentDefinitionSpec{Config: "{}"},
	}}}
	cp, ok := orig.DeepCopyObject().(*v1.NetworkAttachmentDefinitionList)
	if !ok {
		t.Fatalf("DeepCopyObject returned %T", orig.DeepCopyObject())
	}
	if !equality.Semantic.DeepEqual(orig, cp) {
		t.Fatalf("copy differs: %+v vs %+v", orig, cp)
	}
	cp.Items[0].Annotations["a"] = "2"
	cp.Items[0].Spec.Config = `{"changed":true}`
	if orig.Items[0].Annotations["a"] != "1" || orig.Items[0].Spec.Config != "{}" {
		t.Errorf("modifying the copy changed the original: %+v", orig.Items[0])
	}
}

// The annotation keys are the spec's (multi-net §4.1, §5) and the
// device-plugin integration's (spec 001).
func TestAnnotationKeys(t *testing.T) {
	for key, want := range map[string]string{
		v1.NetworksAnnotation:           "k8s.v1.cni.cncf.io/networks",
		v1.NetworkStatusAnnotation:      "k8s.v1.cni.cncf.io/network-status",
		v1.ResourceNameAnnotation:       "k8s.v1.cni.cncf.io/resourceName",
		v1.LegacyResourceNameAnnotation: "kubernetes.v1.cni.cncf.io/resourceName",
	} {
		if key != want {
			t.Errorf("annotation key %q, want %q", key, want)
		}
		// The API server accepts it as an annotation key: a qualified name
		// (DNS-1123 subdomain prefix, "/", name of at most 63 characters).
		if errs := validation.IsQualifiedName(key); len(errs) != 0 {
			t.Errorf("annotation key %q is not a qualified name: %v", key, errs)
		}
	}
}
