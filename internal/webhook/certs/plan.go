package certs

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"time"
)

// Keys of the Secret's data (a kubernetes.io/tls Secret with extra keys).
const (
	// TLSCertKey is the serving certificate (PEM).
	TLSCertKey = "tls.crt"
	// TLSKeyKey is the serving certificate's private key (PEM).
	TLSKeyKey = "tls.key"
	// CACertKey is the current CA certificate (PEM), which signs tls.crt.
	CACertKey = "ca.crt"
	// CAKeyKey is the current CA's private key (PEM).
	CAKeyKey = "ca.key"
	// PreviousCACertKey is the CA certificate replaced by the last CA
	// rotation (PEM), kept in the CA bundle until it expires.
	PreviousCACertKey = "ca-previous.crt"
)

// Spec is what the certificates must be.
type Spec struct {
	// CACommonName is the subject CommonName of a new CA.
	CACommonName string
	// DNSNames and IPs are the serving certificate's subject alternative
	// names, exactly (a change re-issues the certificate).
	DNSNames []string
	IPs      []net.IP
	// CAValidity and CertValidity are the lifetimes of a new CA and a new
	// serving certificate; each is renewed at two thirds of its life.
	CAValidity, CertValidity time.Duration
}

// Check returns an error naming the first bad field of s.
func (s Spec) Check() error {
	switch {
	case len(s.DNSNames) == 0 && len(s.IPs) == 0:
		return errors.New("certificate spec: no DNS name or IP address")
	case s.CAValidity <= 0:
		return fmt.Errorf("certificate spec: CA validity %v: must be positive", s.CAValidity)
	case s.CertValidity <= 0:
		return fmt.Errorf("certificate spec: certificate validity %v: must be positive", s.CertValidity)
	}
	return nil
}

// State is the content of the certificate Secret, parsed.
type State struct {
	CA *KeyPair
	// PreviousCA is the CA replaced by the last rotation, nil when there is
	// none or it has expired.
	PreviousCA *x509.Certificate
	Serving    *KeyPair
}

// CABundle is the PEM the webhook configurations' caBundle must hold: the
// current CA, then the previous CA while it has not expired at now.
func (s *State) CABundle(now time.Time) []byte {
	b := bytes.Clone(s.CA.CertPEM)
	if s.PreviousCA != nil && now.Before(s.PreviousCA.NotAfter) {
		b = append(b, EncodeCertificates(s.PreviousCA)...)
	}
	return b
}

// Data is the Secret data that holds s.
func (s *State) Data() map[string][]byte {
	d := map[string][]byte{
		TLSCertKey: s.Serving.CertPEM,
		TLSKeyKey:  s.Serving.KeyPEM,
		CACertKey:  s.CA.CertPEM,
		CAKeyKey:   s.CA.KeyPEM,
	}
	if s.PreviousCA != nil {
		d[PreviousCACertKey] = EncodeCertificates(s.PreviousCA)
	}
	return d
}

// Plan decides what the Secret must hold at now, given its data (nil when
// the Secret does not exist). It returns the state and why it differs from
// data; no reasons means data is fine as it is.
//
// The CA is replaced when it is missing, unusable (does not parse, key does
// not match, not a CA) or due for renewal (NeedsRenewal); the replaced CA, if
// it parsed and has not expired, becomes PreviousCA. The serving certificate
// is replaced when the CA was, or when it is missing, unusable, due for
// renewal, its SANs are not exactly spec's, or it does not verify against
// the CA at now. Errors: spec is invalid, or generating a key failed.
func Plan(data map[string][]byte, spec Spec, now time.Time) (*State, []string, error) {
	if err := spec.Check(); err != nil {
		return nil, nil, err
	}
	var reasons []string
	st := &State{}
	if prev, err := ParseCertificates(data[PreviousCACertKey]); err == nil && now.Before(prev[0].NotAfter) {
		st.PreviousCA = prev[0]
	} else if len(data[PreviousCACertKey]) > 0 {
		reasons = append(reasons, "previous CA expired or unusable")
	}

	ca, caReason := currentCA(data, now)
	if caReason != "" {
		reasons = append(reasons, caReason)
		if ca != nil && now.Before(ca.Cert.NotAfter) {
			st.PreviousCA = ca.Cert
		}
		var err error
		if ca, err = NewCA(spec.CACommonName, now, spec.CAValidity); err != nil {
			return nil, nil, err
		}
	}
	st.CA = ca

	servingReason := "CA replaced"
	if caReason == "" {
		st.Serving, servingReason = currentServing(data, spec, ca, now)
	}
	if servingReason != "" {
		reasons = append(reasons, "serving certificate: "+servingReason)
		var err error
		if st.Serving, err = NewServing(ca, spec.DNSNames, spec.IPs, now, spec.CertValidity); err != nil {
			return nil, nil, err
		}
	}
	return st, reasons, nil
}

// currentCA parses the CA of data. reason is empty when it can stay; ca is
// non-nil when it parsed.
func currentCA(data map[string][]byte, now time.Time) (ca *KeyPair, reason string) {
	if len(data[CACertKey]) == 0 || len(data[CAKeyKey]) == 0 {
		return nil, "no CA"
	}
	ca, err := ParseKeyPair(data[CACertKey], data[CAKeyKey])
	switch {
	case err != nil:
		return nil, "CA unusable: " + err.Error()
	case !ca.Cert.IsCA || ca.Cert.KeyUsage&x509.KeyUsageCertSign == 0:
		return ca, "CA certificate is not a CA"
	case NeedsRenewal(ca.Cert, now):
		return ca, "CA due for renewal since " + RenewAt(ca.Cert).UTC().Format(time.RFC3339)
	}
	return ca, ""
}

// currentServing parses the serving certificate of data and checks it
// against spec and ca. reason is empty when it can stay.
func currentServing(data map[string][]byte, spec Spec, ca *KeyPair, now time.Time) (*KeyPair, string) {
	if len(data[TLSCertKey]) == 0 || len(data[TLSKeyKey]) == 0 {
		return nil, "missing"
	}
	kp, err := ParseKeyPair(data[TLSCertKey], data[TLSKeyKey])
	switch {
	case err != nil:
		return nil, "unusable: " + err.Error()
	case NeedsRenewal(kp.Cert, now):
		return nil, "due for renewal since " + RenewAt(kp.Cert).UTC().Format(time.RFC3339)
	case !Covers(kp.Cert, spec.DNSNames, spec.IPs):
		return nil, "subject alternative names changed"
	}
	if err := VerifyServing(kp.Cert, []*x509.Certificate{ca.Cert}, nil, now); err != nil {
		return nil, "does not verify against the CA: " + err.Error()
	}
	return kp, ""
}
