package certs

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/multinet/multinet/internal/testing/testskip"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// clock is a settable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }

func newTestManager(t *testing.T, cs *fake.Clientset, clk *clock, onCA func(context.Context, []byte) error) *Manager {
	t.Helper()
	m, err := NewManager(cs.CoreV1(), ManagerOptions{
		Namespace: "multinet-system", SecretName: "certs", Spec: testSpec,
		OnCABundle: onCA, Now: clk.Now, RetryInterval: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// emptySecret is the certificate Secret as the install ships it: no type
// (Opaque), no data.
func emptySecret(namespace, name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
}

// newClientset is a fake API holding the shipped, empty certificate Secret
// multinet-system/certs (newTestManager's) and ns/s.
func newClientset() *fake.Clientset {
	return fake.NewClientset(emptySecret("multinet-system", "certs"), emptySecret("ns", "s"))
}

func servedLeaf(t *testing.T, m *Manager) *x509.Certificate {
	t.Helper()
	c, err := m.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	return c.Leaf
}

func writes(cs *fake.Clientset) int {
	n := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == "create" || a.GetVerb() == "update" {
			n++
		}
	}
	return n
}

func TestManagerCreatesAndShares(t *testing.T) {
	ctx := context.Background()
	cs := newClientset()
	clk := &clock{now: t0}
	var bundles [][]byte
	m := newTestManager(t, cs, clk, func(_ context.Context, b []byte) error { bundles = append(bundles, b); return nil })
	if _, err := m.GetCertificate(nil); err == nil || m.Ready() == nil {
		t.Fatal("certificate served before Sync")
	}
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	sec, err := cs.CoreV1().Secrets("multinet-system").Get(ctx, "certs", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{TLSCertKey, TLSKeyKey, CACertKey, CAKeyKey} {
		if len(sec.Data[k]) == 0 {
			t.Errorf("Secret has no %s", k)
		}
	}
	leaf := servedLeaf(t, m)
	if !bytes.Equal(EncodeCertificates(leaf), sec.Data[TLSCertKey]) {
		t.Error("served certificate is not the Secret's")
	}
	if len(bundles) != 1 || !bytes.Equal(bundles[0], sec.Data[CACertKey]) || !bytes.Equal(m.CABundle(), bundles[0]) {
		t.Fatalf("OnCABundle got %d bundles", len(bundles))
	}

	// A second replica uses the same Secret without writing it.
	before := writes(cs)
	m2 := newTestManager(t, cs, clk, nil)
	if err := m2.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if writes(cs) != before {
		t.Error("second replica wrote the Secret")
	}
	if !servedLeaf(t, m2).Equal(leaf) {
		t.Error("replicas serve different certificates")
	}
	// Re-syncing before the renewal time changes nothing.
	clk.Set(RenewAt(leaf).Add(-time.Minute))
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if writes(cs) != before || !servedLeaf(t, m).Equal(leaf) {
		t.Error("certificate changed before its renewal time")
	}
}

// The install ships the Secret empty (deploy/base/webhook-rbac.yaml): the
// Manager fills it with an update and serves what it wrote; it never
// creates a Secret (the webhook's Role has no create).
func TestManagerFillsShippedEmptySecret(t *testing.T) {
	ctx := context.Background()
	cs := newClientset()
	m := newTestManager(t, cs, &clock{now: t0}, nil)
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	sec, err := cs.CoreV1().Secrets("multinet-system").Get(ctx, "certs", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{TLSCertKey, TLSKeyKey, CACertKey, CAKeyKey} {
		if len(sec.Data[k]) == 0 {
			t.Errorf("Secret not filled: no %s", k)
		}
	}
	if !servedLeaf(t, m).Equal(mustLeaf(t, sec.Data[TLSCertKey])) {
		t.Error("served certificate is not the one written into the Secret")
	}
	for _, a := range cs.Actions() {
		if a.GetVerb() == "create" {
			t.Errorf("Manager called create on %s", a.GetResource().Resource)
		}
	}
}

// A missing Secret is an error that names it and says how to get it back;
// the Manager does not create it and serves nothing.
func TestManagerMissingSecret(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	m := newTestManager(t, cs, &clock{now: t0}, nil)
	err := m.Sync(ctx)
	if !errors.Is(err, ErrSecretMissing) {
		t.Fatalf("Sync with no Secret: %v, want ErrSecretMissing", err)
	}
	for _, want := range []string{"multinet-system/certs", "kubectl -n multinet-system create secret generic certs"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	for _, a := range cs.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("Manager called %s on %s with no Secret", a.GetVerb(), a.GetResource().Resource)
		}
	}
	if m.Ready() == nil {
		t.Error("ready without a Secret")
	}
}

func mustLeaf(t *testing.T, pemData []byte) *x509.Certificate {
	t.Helper()
	c, err := ParseCertificates(pemData)
	if err != nil {
		t.Fatal(err)
	}
	return c[0]
}

func TestManagerRotatesAndPublishesFirst(t *testing.T) {
	ctx := context.Background()
	cs := newClientset()
	clk := &clock{now: t0}
	var m *Manager
	var servedAtPublish []*x509.Certificate
	m = newTestManager(t, cs, clk, func(_ context.Context, b []byte) error {
		if c, err := m.GetCertificate(nil); err == nil {
			servedAtPublish = append(servedAtPublish, c.Leaf)
		}
		return nil
	})
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	oldLeaf, oldCA := servedLeaf(t, m), m.CABundle()

	// Serving renewal at 2/3 of its life.
	clk.Set(RenewAt(oldLeaf))
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	newLeaf := servedLeaf(t, m)
	if newLeaf.Equal(oldLeaf) {
		t.Fatal("serving certificate not rotated")
	}
	if len(servedAtPublish) != 1 || !servedAtPublish[0].Equal(oldLeaf) {
		t.Error("new certificate served before OnCABundle ran")
	}
	if !bytes.Equal(m.CABundle(), oldCA) {
		t.Error("CA bundle changed on a serving renewal")
	}

	// CA renewal: the bundle holds the new and the old CA.
	ca, _ := ParseCertificates(oldCA)
	clk.Set(RenewAt(ca[0]))
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	roots, _ := ParseCertificates(m.CABundle())
	if len(roots) != 2 || !roots[1].Equal(ca[0]) {
		t.Fatalf("bundle after CA rotation: %d certificates", len(roots))
	}
	if err := VerifyServing(servedLeaf(t, m), roots[:1], testSpec.DNSNames, clk.Now()); err != nil {
		t.Errorf("new serving certificate vs new CA: %v", err)
	}
}

func TestManagerPublishFailure(t *testing.T) {
	ctx := context.Background()
	cs := newClientset()
	clk := &clock{now: t0}
	fail := errors.New("no configuration yet")
	var failing bool
	m := newTestManager(t, cs, clk, func(context.Context, []byte) error {
		if failing {
			return fail
		}
		return nil
	})
	failing = true
	// Nothing served yet: the certificate is loaded anyway.
	if err := m.Sync(ctx); !errors.Is(err, fail) {
		t.Fatalf("Sync: %v", err)
	}
	if m.Ready() != nil {
		t.Fatal("not ready after a Sync whose publishing failed")
	}
	leaf := servedLeaf(t, m)
	// A renewed certificate is not served while publishing fails and the old
	// one is still good ...
	clk.Set(RenewAt(leaf))
	if err := m.Sync(ctx); !errors.Is(err, fail) {
		t.Fatalf("Sync: %v", err)
	}
	if !servedLeaf(t, m).Equal(leaf) {
		t.Error("switched certificates without publishing the CA bundle")
	}
	// ... and is once publishing works.
	failing = false
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if servedLeaf(t, m).Equal(leaf) {
		t.Error("renewed certificate not served after publishing succeeded")
	}
}

func TestManagerRaces(t *testing.T) {
	ctx := context.Background()
	clk := &clock{now: t0}

	// The first fill loses to another replica: the manager uses the
	// winner's data.
	cs := newClientset()
	winner, _ := mustPlan(t, nil, testSpec, t0)
	lost := false
	cs.PrependReactor("update", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if lost {
			return false, nil, nil
		}
		lost = true
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "multinet-system", Name: "certs"}, Data: winner.Data()}
		if err := cs.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, sec, "multinet-system"); err != nil {
			t.Fatal(err)
		}
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, "certs", errors.New("stale"))
	})
	m := newTestManager(t, cs, clk, nil)
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if !servedLeaf(t, m).Equal(winner.Serving.Cert) {
		t.Error("did not adopt the other replica's certificate")
	}

	// An update conflict is retried.
	clk.Set(RenewAt(winner.Serving.Cert))
	conflicts := 1
	cs.PrependReactor("update", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, "certs", errors.New("stale"))
		}
		return false, nil, nil
	})
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if servedLeaf(t, m).Equal(winner.Serving.Cert) {
		t.Error("not renewed after a conflict")
	}
}

func TestManagerRunWakesForRenewal(t *testing.T) {
	if testing.Short() {
		testskip.Skip(t, "waits for a real renewal")
	}
	cs := newClientset()
	spec := testSpec
	// Life = Backdate (300 s) + 153 s = 453 s; 2/3 of it is 302 s after
	// NotBefore = now-300 s: renewal is due 2 s from now.
	spec.CertValidity = 153 * time.Second
	m, err := NewManager(cs.CoreV1(), ManagerOptions{Namespace: "ns", SecretName: "s", Spec: spec, CheckInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	first := servedLeaf(t, m)
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if c, _ := m.GetCertificate(nil); !c.Leaf.Equal(first) {
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("Run returned %v", err)
			}
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("not renewed by %v (renew at %v)", time.Now(), RenewAt(first))
}

// A Sync before Run whose publishing failed (the webhook configurations are
// applied after the webhook's pod starts) is retried after RetryInterval,
// not after CheckInterval: before, the deployed webhook left caBundle empty
// for CheckInterval when kubectl apply created its Deployment first.
func TestManagerRunRetriesAFailedFirstSync(t *testing.T) {
	cs := newClientset()
	var mu sync.Mutex
	published := 0
	configured := false
	m, err := NewManager(cs.CoreV1(), ManagerOptions{
		Namespace: "ns", SecretName: "s", Spec: testSpec,
		CheckInterval: time.Hour, RetryInterval: 50 * time.Millisecond,
		OnCABundle: func(context.Context, []byte) error {
			mu.Lock()
			defer mu.Unlock()
			if !configured {
				return errors.New("mutatingwebhookconfigurations \"multinet-webhook\" not found")
			}
			published++
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Sync(ctx); err == nil {
		t.Fatal("Sync succeeded with no webhook configuration to publish to")
	}
	mu.Lock()
	configured = true
	mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	for {
		mu.Lock()
		n := published
		mu.Unlock()
		if n > 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("CA bundle not published by Run within 30 s (RetryInterval 50ms, CheckInterval 1h)")
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run returned %v", err)
	}
}
