package v1alpha1_test

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/multinet/multinet/api/k8s.cni.cncf.io/v1alpha1"
)

func newCodecs(t *testing.T) serializer.CodecFactory {
	t.Helper()
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatalf("AddToScheme: %v", err)
	}
	return serializer.NewCodecFactory(s)
}

// specExample is the §8.2.1 example with the group of the §8.1 CRD
// (k8s.cni.cncf.io); the example itself says persistentip.cni.cncf.io.
const specExample = `apiVersion: k8s.cni.cncf.io/v1alpha1
kind: IPAMClaim
metadata:
  name: vm-a.tenantred.pod16367aacb67
  namespace: ns1
  ownerReferences:
  - apiVersion: kubevirt.io/v1
    kind: VirtualMachine
    name: vm-a
    uid: a0790345-4e84-4257-837a-e3d762d191ab
spec:
  network: tenantred
  interface: pod16367aacb67
status:
  ips:
  - 10.128.20.8/24
  - fd10:128:20::8/64
`

func TestDecodeSpecExample(t *testing.T) {
	obj, gvk, err := newCodecs(t).UniversalDeserializer().Decode([]byte(specExample), nil, nil)
	if err != nil {
		t.Fatalf("decode §8.2.1 example: %v", err)
	}
	if want := (schema.GroupVersionKind{Group: "k8s.cni.cncf.io", Version: "v1alpha1", Kind: "IPAMClaim"}); *gvk != want {
		t.Errorf("gvk = %v, want %v", gvk, want)
	}
	claim, ok := obj.(*v1alpha1.IPAMClaim)
	if !ok {
		t.Fatalf("decoded %T, want *IPAMClaim", obj)
	}
	want := v1alpha1.IPAMClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: "k8s.cni.cncf.io/v1alpha1", Kind: "IPAMClaim"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      "vm-a.tenantred.pod16367aacb67",
			Namespace: "ns1",
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Name: "vm-a",
				UID: "a0790345-4e84-4257-837a-e3d762d191ab",
			}},
		},
		Spec:   v1alpha1.IPAMClaimSpec{Network: "tenantred", Interface: "pod16367aacb67"},
		Status: v1alpha1.IPAMClaimStatus{IPs: []string{"10.128.20.8/24", "fd10:128:20::8/64"}},
	}
	if !equality.Semantic.DeepEqual(*claim, want) {
		t.Errorf("decoded\n %+v\nwant\n %+v", *claim, want)
	}
}

// The example's literal group (persistentip.cni.cncf.io) is not the CRD's
// (§8.1); we serve only k8s.cni.cncf.io.
func TestExampleGroupIsNotRegistered(t *testing.T) {
	y := strings.Replace(specExample, "k8s.cni.cncf.io/v1alpha1", "persistentip.cni.cncf.io/v1alpha1", 1)
	if _, _, err := newCodecs(t).UniversalDeserializer().Decode([]byte(y), nil, nil); err == nil {
		t.Error("decoding group persistentip.cni.cncf.io succeeded, want an unregistered-kind error")
	}
}

// §8.2: spec.network, spec.interface and status.ips are always on the wire
// (no omitempty), as in the spec's Go definition.
func TestEncodeFields(t *testing.T) {
	codecs := newCodecs(t)
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		t.Fatal("no JSON serializer")
	}
	enc := codecs.EncoderForVersion(info.Serializer, v1alpha1.SchemeGroupVersion)
	claim := &v1alpha1.IPAMClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "vm-a.tenantred", Namespace: "ns1"},
		Spec:       v1alpha1.IPAMClaimSpec{Network: "tenantred", Interface: "eth1"},
		Status:     v1alpha1.IPAMClaimStatus{IPs: []string{}},
	}
	data, err := runtime.Encode(enc, claim)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	for _, want := range []string{
		`"apiVersion":"k8s.cni.cncf.io/v1alpha1"`, `"kind":"IPAMClaim"`,
		`"spec":{"network":"tenantred","interface":"eth1"}`, `"status":{"ips":[]}`,
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("encoded %s: want %s", data, want)
		}
	}
	back, err := runtime.Decode(codecs.UniversalDeserializer(), data)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	got := back.(*v1alpha1.IPAMClaim)
	got.TypeMeta = metav1.TypeMeta{}
	if !equality.Semantic.DeepEqual(got, claim) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, claim)
	}
}

func TestSchemeRegistration(t *testing.T) {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []runtime.Object{&v1alpha1.IPAMClaim{}, &v1alpha1.IPAMClaimList{}} {
		gvks, _, err := s.ObjectKinds(obj)
		if err != nil || len(gvks) != 1 || gvks[0].GroupVersion() != v1alpha1.SchemeGroupVersion {
			t.Errorf("ObjectKinds(%T) = %v, %v; want one kind in %v", obj, gvks, err, v1alpha1.SchemeGroupVersion)
		}
	}
	if got, want := v1alpha1.Resource(v1alpha1.IPAMClaimResource).String(), "ipamclaims.k8s.cni.cncf.io"; got != want {
		t.Errorf("Resource() = %q, want %q (the CRD name, §8.1)", got, want)
	}
}

func TestDeepCopyIsIndependent(t *testing.T) {
	orig := &v1alpha1.IPAMClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Finalizers: []string{"f"}},
		Spec:       v1alpha1.IPAMClaimSpec{Network: "n", Interface: "eth1"},
		Status:     v1alpha1.IPAMClaimStatus{IPs: []string{"10.0.0.1/24"}},
	}
	cp := orig.DeepCopyObject().(*v1alpha1.IPAMClaim)
	if !reflect.DeepEqual(orig, cp) {
		t.Fatalf("copy differs")
	}
	cp.Status.IPs[0] = "10.0.0.2/24"
	cp.Finalizers[0] = "g"
	if orig.Status.IPs[0] != "10.0.0.1/24" || orig.Finalizers[0] != "f" {
		t.Errorf("modifying the copy changed the original: %+v", orig)
	}
	list := &v1alpha1.IPAMClaimList{Items: []v1alpha1.IPAMClaim{*orig}}
	lcp := list.DeepCopyObject().(*v1alpha1.IPAMClaimList)
	lcp.Items[0].Status.IPs[0] = "x"
	if list.Items[0].Status.IPs[0] != "10.0.0.1/24" {
		t.Error("modifying the list copy changed the original")
	}
}

// §8.2 / §8.2.1: status.ips are IPv4/IPv6 addresses, in CIDR form in the
// example.
func TestStatusPrefixes(t *testing.T) {
	tests := []struct {
		name    string
		ips     []string
		want    []netip.Prefix
		wantErr string
	}{
		{name: "nil", ips: nil, want: nil},
		{name: "empty", ips: []string{}, want: nil},
		{
			name: "§8.2.1 example",
			ips:  []string{"10.128.20.8/24", "fd10:128:20::8/64"},
			want: []netip.Prefix{netip.MustParsePrefix("10.128.20.8/24"), netip.MustParsePrefix("fd10:128:20::8/64")},
		},
		{
			name: "bare addresses are host prefixes",
			ips:  []string{"192.0.2.1", "2001:db8::1"},
			want: []netip.Prefix{netip.MustParsePrefix("192.0.2.1/32"), netip.MustParsePrefix("2001:db8::1/128")},
		},
		{name: "garbage", ips: []string{"10.0.0.1/24", "not-an-ip"}, wantErr: "status.ips[1]"},
		{name: "bad prefix length", ips: []string{"10.0.0.1/33"}, wantErr: "status.ips[0]"},
		{name: "zone", ips: []string{"fe80::1%eth0"}, wantErr: "status.ips[0]"},
		{name: "empty entry", ips: []string{""}, wantErr: "status.ips[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := v1alpha1.IPAMClaimStatus{IPs: tt.ips}.Prefixes()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// Prefixes never panics, and whatever it accepts formats back to a prefix
// that parses to the same value.
func FuzzStatusPrefixes(f *testing.F) {
	for _, s := range []string{"10.128.20.8/24", "fd10:128:20::8/64", "192.0.2.1", "::1", "fe80::1%eth0", "1.2.3.4/", "/24", " 10.0.0.1/8 ", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := v1alpha1.IPAMClaimStatus{IPs: []string{s}}.Prefixes()
		if err != nil {
			return
		}
		if len(got) != 1 || !got[0].IsValid() {
			t.Fatalf("Prefixes(%q) = %v without error", s, got)
		}
		back, err := netip.ParsePrefix(got[0].String())
		if err != nil || back != got[0] {
			t.Fatalf("Prefixes(%q) = %v, which does not round-trip: %v, %v", s, got[0], back, err)
		}
	})
}
