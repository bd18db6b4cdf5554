package client_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/pkg/client/clientset/versioned"
)

// seen is one request the test server received.
type seen struct{ method, path, query, contentType, accept string }

// echoServer answers every write with its body and every GET with body,
// as JSON, and logs the requests.
func echoServer(t *testing.T, getBody string) (*httptest.Server, func() []seen) {
	t.Helper()
	var mu sync.Mutex
	var log []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		log = append(log, seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"), r.Header.Get("Accept")})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet || r.Method == http.MethodPatch {
			body = []byte(getBody)
		}
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []seen {
		mu.Lock()
		defer mu.Unlock()
		return append([]seen(nil), log...)
	}
}

// The generated clientset reaches the CRDs' REST paths (the NAD's plural is
// network-attachment-definitions, spec §3.1; IPAMClaim status is a
// subresource, §8.2) and speaks JSON both ways: CRDs have no protobuf.
func TestClientsetPathsAndJSON(t *testing.T) {
	const claimJSON = `{"apiVersion":"k8s.cni.cncf.io/v1alpha1","kind":"IPAMClaim","metadata":{"namespace":"ns1","name":"vm-a.net1.eth1"},"spec":{"network":"net1","interface":"eth1"},"status":{"ips":["10.0.0.9/24"]}}`
	srv, requests := echoServer(t, claimJSON)
	cs, err := versioned.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	created, err := cs.K8sCniCncfIoV1().NetworkAttachmentDefinitions("ns1").Create(ctx, &nadv1.NetworkAttachmentDefinition{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "net-a"},
		Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: `{"cniVersion":"1.0.0","type":"bridge"}`},
	}, metav1.CreateOptions{})
	if err != nil || created.Name != "net-a" || !strings.Contains(created.Spec.Config, "bridge") {
		t.Fatalf("Create NAD = %+v, %v", created, err)
	}
	claims := cs.K8sCniCncfIoV1alpha1().IPAMClaims("ns1")
	claim, err := claims.Get(ctx, "vm-a.net1.eth1", metav1.GetOptions{})
	if err != nil || claim.Spec.Network != "net1" || len(claim.Status.IPs) != 1 {
		t.Fatalf("Get IPAMClaim = %+v, %v", claim, err)
	}
	if _, err := claims.UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("UpdateStatus: %v", err)
	}
	if _, err := claims.Patch(ctx, claim.Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"a":"b"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("Patch: %v", err)
	}
	if _, err := cs.K8sCniCncfIoV1alpha1().IPAMClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: "a=b"}); err != nil {
		t.Fatalf("List: %v", err)
	}

	const nads = "/apis/k8s.cni.cncf.io/v1/namespaces/ns1/network-attachment-definitions"
	const claim1 = "/apis/k8s.cni.cncf.io/v1alpha1/namespaces/ns1/ipamclaims/vm-a.net1.eth1"
	want := []seen{
		{method: "POST", path: nads, contentType: "application/json"},
		{method: "GET", path: claim1},
		{method: "PUT", path: claim1 + "/status", contentType: "application/json"},
		{method: "PATCH", path: claim1, contentType: string(types.MergePatchType)},
		{method: "GET", path: "/apis/k8s.cni.cncf.io/v1alpha1/ipamclaims", query: "labelSelector=a%3Db"},
	}
	got := requests()
	if len(got) != len(want) {
		t.Fatalf("server saw %+v, want %d requests", got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.method != w.method || g.path != w.path || g.contentType != w.contentType || (w.query != "" && g.query != w.query) {
			t.Errorf("request %d = %s %s?%s (Content-Type %q), want %s %s?%s (Content-Type %q)", i, g.method, g.path, g.query, g.contentType, w.method, w.path, w.query, w.contentType)
		}
		if !strings.HasPrefix(g.accept, "application/json") {
			t.Errorf("request %d %s %s: Accept %q, want application/json first", i, g.method, g.path, g.accept)
		}
	}
}
