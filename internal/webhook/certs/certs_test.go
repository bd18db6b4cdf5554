package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	t0       = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	testSpec = Spec{
		CACommonName: "test-ca",
		DNSNames:     []string{"multinet-webhook.multinet-system.svc", "multinet-webhook.multinet-system.svc.cluster.local"},
		IPs:          []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
		CAValidity:   300 * 24 * time.Hour,
		CertValidity: 30 * 24 * time.Hour,
	}
)

func mustPlan(t *testing.T, data map[string][]byte, spec Spec, now time.Time) (*State, []string) {
	t.Helper()
	st, reasons, err := Plan(data, spec, now)
	if err != nil {
		t.Fatal(err)
	}
	return st, reasons
}

func TestPlanFromNothing(t *testing.T) {
	st, reasons := mustPlan(t, nil, testSpec, t0)
	if len(reasons) == 0 {
		t.Fatal("no reasons for a new Secret")
	}
	ca, srv := st.CA.Cert, st.Serving.Cert
	if !ca.IsCA || ca.Subject.CommonName != "test-ca" || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("CA: IsCA=%v CN=%q usage=%v", ca.IsCA, ca.Subject.CommonName, ca.KeyUsage)
	}
	if got, want := ca.NotAfter.Sub(t0), testSpec.CAValidity; got != want {
		t.Errorf("CA lifetime from now %v, want %v", got, want)
	}
	if got, want := srv.NotAfter.Sub(t0), testSpec.CertValidity; got != want {
		t.Errorf("serving lifetime from now %v, want %v", got, want)
	}
	if !srv.NotBefore.Equal(t0.Add(-Backdate)) {
		t.Errorf("serving NotBefore %v", srv.NotBefore)
	}
	if srv.IsCA || !slices.Contains(srv.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		t.Errorf("serving: IsCA=%v ExtKeyUsage=%v", srv.IsCA, srv.ExtKeyUsage)
	}
	if !slices.Equal(srv.DNSNames, testSpec.DNSNames) || len(srv.IPAddresses) != 2 ||
		!srv.IPAddresses[0].Equal(testSpec.IPs[0]) || !srv.IPAddresses[1].Equal(testSpec.IPs[1]) {
		t.Errorf("SANs %v %v", srv.DNSNames, srv.IPAddresses)
	}
	// The chain verifies for every DNS name and IP, with the bundle as roots.
	roots, err := ParseCertificates(st.CABundle(t0))
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyServing(srv, roots, testSpec.DNSNames, t0); err != nil {
		t.Errorf("verify: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, ip := range []string{"127.0.0.1", "::1"} {
		if _, err := srv.Verify(x509.VerifyOptions{Roots: pool, DNSName: ip, CurrentTime: t0}); err != nil {
			t.Errorf("verify for IP %s: %v", ip, err)
		}
	}
	if _, err := srv.Verify(x509.VerifyOptions{Roots: pool, DNSName: "other.example", CurrentTime: t0}); err == nil {
		t.Error("verified for a name not in the SANs")
	}
	// The Secret data round-trips and is a usable TLS key pair.
	d := st.Data()
	if _, err := tls.X509KeyPair(d[TLSCertKey], d[TLSKeyKey]); err != nil {
		t.Errorf("tls key pair: %v", err)
	}
	st2, reasons := mustPlan(t, d, testSpec, t0.Add(time.Hour))
	if len(reasons) != 0 {
		t.Errorf("fresh data planned again: %v", reasons)
	}
	if !st2.Serving.Cert.Equal(srv) || !st2.CA.Cert.Equal(ca) {
		t.Error("unchanged data gave other certificates")
	}
}

func TestRenewAt(t *testing.T) {
	c := &x509.Certificate{NotBefore: t0, NotAfter: t0.Add(90 * time.Hour)}
	if got := RenewAt(c); !got.Equal(t0.Add(60 * time.Hour)) {
		t.Errorf("RenewAt %v", got)
	}
	if NeedsRenewal(c, t0.Add(60*time.Hour-time.Nanosecond)) || !NeedsRenewal(c, t0.Add(60*time.Hour)) {
		t.Error("NeedsRenewal threshold is not at 2/3")
	}
}

func TestPlanServingRenewal(t *testing.T) {
	st, _ := mustPlan(t, nil, testSpec, t0)
	d := st.Data()
	renew := RenewAt(st.Serving.Cert)
	if _, reasons := mustPlan(t, d, testSpec, renew.Add(-time.Second)); len(reasons) != 0 {
		t.Fatalf("renewed before 2/3 of the life: %v", reasons)
	}
	st2, reasons := mustPlan(t, d, testSpec, renew)
	if len(reasons) != 1 || !strings.Contains(reasons[0], "serving certificate: due for renewal") {
		t.Fatalf("reasons %v", reasons)
	}
	if st2.Serving.Cert.Equal(st.Serving.Cert) {
		t.Fatal("serving certificate not renewed")
	}
	if !st2.CA.Cert.Equal(st.CA.Cert) || st2.PreviousCA != nil {
		t.Error("CA changed on a serving renewal")
	}
	if err := VerifyServing(st2.Serving.Cert, []*x509.Certificate{st.CA.Cert}, testSpec.DNSNames, renew); err != nil {
		t.Errorf("renewed certificate does not verify with the unchanged CA: %v", err)
	}
}

func TestPlanCARenewalKeepsPreviousCA(t *testing.T) {
	st, _ := mustPlan(t, nil, testSpec, t0)
	renew := RenewAt(st.CA.Cert)
	// Serving certs were renewed along the way; take the data at the CA's
	// renewal time with a serving certificate that is still fresh.
	fresh, _ := mustPlan(t, map[string][]byte{CACertKey: st.CA.CertPEM, CAKeyKey: st.CA.KeyPEM}, testSpec, renew.Add(-time.Hour))
	st2, reasons := mustPlan(t, fresh.Data(), testSpec, renew)
	if !strings.Contains(strings.Join(reasons, ";"), "CA due for renewal") {
		t.Fatalf("reasons %v", reasons)
	}
	if st2.CA.Cert.Equal(st.CA.Cert) || st2.PreviousCA == nil || !st2.PreviousCA.Equal(st.CA.Cert) {
		t.Fatal("CA not rotated with the old one kept as previous")
	}
	roots, err := ParseCertificates(st2.CABundle(renew))
	if err != nil || len(roots) != 2 {
		t.Fatalf("bundle: %d certs, %v", len(roots), err)
	}
	// Both the old serving certificate (still served by a replica that has
	// not synced) and the new one verify against the bundle.
	for _, c := range []*x509.Certificate{fresh.Serving.Cert, st2.Serving.Cert} {
		if err := VerifyServing(c, roots, testSpec.DNSNames, renew); err != nil {
			t.Errorf("verify against bundle: %v", err)
		}
	}
	if err := VerifyServing(st2.Serving.Cert, []*x509.Certificate{st2.CA.Cert}, nil, renew); err != nil {
		t.Errorf("new serving certificate not signed by the new CA: %v", err)
	}
	// Stable afterwards; the previous CA leaves the bundle when it expires.
	if _, reasons := mustPlan(t, st2.Data(), testSpec, renew.Add(time.Minute)); len(reasons) != 0 {
		t.Errorf("replanned right after rotation: %v", reasons)
	}
	after := st.CA.Cert.NotAfter.Add(time.Second)
	st3, reasons := mustPlan(t, st2.Data(), testSpec, after)
	if st3.PreviousCA != nil || !strings.Contains(strings.Join(reasons, ";"), "previous CA expired") {
		t.Errorf("expired previous CA kept: %v", reasons)
	}
	if n, _ := ParseCertificates(st3.CABundle(after)); len(n) != 1 {
		t.Errorf("bundle has %d certificates after the previous CA expired", len(n))
	}
}

func TestPlanReissues(t *testing.T) {
	st, _ := mustPlan(t, nil, testSpec, t0)
	other, _ := mustPlan(t, nil, testSpec, t0)
	tests := []struct {
		name   string
		edit   func(d map[string][]byte)
		spec   func(s Spec) Spec
		reason string
		newCA  bool
	}{
		{name: "SAN added", spec: func(s Spec) Spec { s.DNSNames = append(slices.Clone(s.DNSNames), "x.example"); return s }, reason: "subject alternative names changed"},
		{name: "IP removed", spec: func(s Spec) Spec { s.IPs = s.IPs[:1]; return s }, reason: "subject alternative names changed"},
		{name: "serving key mismatch", edit: func(d map[string][]byte) { d[TLSKeyKey] = other.Serving.KeyPEM }, reason: "does not match"},
		{name: "serving signed by another CA", edit: func(d map[string][]byte) {
			d[TLSCertKey], d[TLSKeyKey] = other.Serving.CertPEM, other.Serving.KeyPEM
		}, reason: "does not verify against the CA"},
		{name: "serving garbage", edit: func(d map[string][]byte) { d[TLSCertKey] = []byte("junk") }, reason: "unusable"},
		{name: "CA key missing", edit: func(d map[string][]byte) { delete(d, CAKeyKey) }, reason: "no CA", newCA: true},
		{name: "CA is a leaf", edit: func(d map[string][]byte) {
			d[CACertKey], d[CAKeyKey] = st.Serving.CertPEM, st.Serving.KeyPEM
		}, reason: "not a CA", newCA: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := st.Data()
			if tt.edit != nil {
				tt.edit(d)
			}
			spec := testSpec
			if tt.spec != nil {
				spec = tt.spec(spec)
			}
			st2, reasons := mustPlan(t, d, spec, t0)
			if !strings.Contains(strings.Join(reasons, ";"), tt.reason) {
				t.Fatalf("reasons %v, want %q", reasons, tt.reason)
			}
			if got := !st2.CA.Cert.Equal(st.CA.Cert); got != tt.newCA {
				t.Errorf("new CA %v, want %v", got, tt.newCA)
			}
			if !Covers(st2.Serving.Cert, spec.DNSNames, spec.IPs) {
				t.Error("new serving certificate does not cover the spec")
			}
			if err := VerifyServing(st2.Serving.Cert, []*x509.Certificate{st2.CA.Cert}, spec.DNSNames, t0); err != nil {
				t.Errorf("verify: %v", err)
			}
		})
	}
}

func TestServingNeverOutlivesCA(t *testing.T) {
	ca, err := NewCA("short", t0, 10*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServing(ca, []string{"a"}, nil, t0, 100*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Cert.NotAfter.Equal(ca.Cert.NotAfter) {
		t.Errorf("serving NotAfter %v, CA %v", s.Cert.NotAfter, ca.Cert.NotAfter)
	}
	if _, err := NewServing(ca, []string{"a"}, nil, t0.Add(11*time.Hour), time.Hour); err == nil {
		t.Error("issued from an expired CA")
	}
}

func TestParseKeyPairOpenSSLStyleKeys(t *testing.T) {
	// A CA whose key is a SEC 1 "EC PRIVATE KEY" (openssl ecparam -genkey),
	// as an admin could pre-seed the Secret with.
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := NewCA("x", t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := *ca.Cert
	tmpl.PublicKey = key.Public()
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, &tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, _ := x509.MarshalECPrivateKey(key)
	kp, err := ParseKeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: ecDER}))
	if err != nil {
		t.Fatalf("EC key: %v", err)
	}
	if _, err := NewServing(kp, []string{"a"}, nil, t0, time.Minute); err != nil {
		t.Errorf("signing with a parsed EC key: %v", err)
	}
	if _, err := ParseKeyPair(kp.CertPEM, ca.KeyPEM); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("mismatched key: %v", err)
	}
}

func TestSpecCheck(t *testing.T) {
	for _, s := range []Spec{
		{CAValidity: time.Hour, CertValidity: time.Hour},
		{DNSNames: []string{"a"}, CertValidity: time.Hour},
		{DNSNames: []string{"a"}, CAValidity: time.Hour},
	} {
		if err := s.Check(); err == nil {
			t.Errorf("%+v: no error", s)
		}
	}
}
