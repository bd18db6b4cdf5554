// Package certs creates, checks and rotates the webhook's certificate
// authority and TLS serving certificate (crypto/x509, ECDSA P-256), and
// keeps them in a Secret that every replica of the webhook shares (Manager).
// The Secret is shipped empty by the install and filled here: the webhook
// may update that one Secret and create none.
//
// A certificate is renewed once two thirds of its lifetime have passed
// (RenewAt). After a CA rotation the previous CA stays in the CA bundle
// until it expires, so that an API server holding either bundle trusts the
// serving certificate that any replica serves during the switch.
package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"
)

// Backdate is how far before "now" a new certificate's NotBefore is set, to
// tolerate clock skew between the webhook and the API server.
const Backdate = 5 * time.Minute

// KeyPair is a certificate and its private key, parsed and as PEM.
type KeyPair struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte // one "CERTIFICATE" block
	KeyPEM  []byte // one "PRIVATE KEY" (PKCS #8) block for keys made here
}

// NewCA returns a new self-signed CA certificate (ECDSA P-256, path length
// 0) with commonName, valid from now-Backdate to now+validity.
func NewCA(commonName string, now time.Time, validity time.Duration) (*KeyPair, error) {
	if validity <= 0 {
		return nil, fmt.Errorf("CA validity %v: must be positive", validity)
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-Backdate),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	return issue(tmpl, nil)
}

// NewServing returns a TLS server certificate (ECDSA P-256, ExtKeyUsage
// ServerAuth) for dnsNames and ips signed by ca, valid from now-Backdate
// to now+validity but never after ca expires. The subject's CommonName is
// the first DNS name (or IP). Errors: no names, non-positive validity, ca
// already expired.
func NewServing(ca *KeyPair, dnsNames []string, ips []net.IP, now time.Time, validity time.Duration) (*KeyPair, error) {
	if len(dnsNames) == 0 && len(ips) == 0 {
		return nil, errors.New("serving certificate: no DNS name or IP address")
	}
	if validity <= 0 {
		return nil, fmt.Errorf("serving certificate validity %v: must be positive", validity)
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	if !notAfter.After(now) {
		return nil, fmt.Errorf("serving certificate: CA %q expired at %s", ca.Cert.Subject.CommonName, ca.Cert.NotAfter.Format(time.RFC3339))
	}
	cn := ""
	if len(dnsNames) > 0 {
		cn = dnsNames[0]
	} else {
		cn = ips[0].String()
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: cn},
		DNSNames:              slices.Clone(dnsNames),
		IPAddresses:           slices.Clone(ips),
		NotBefore:             now.Add(-Backdate),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	return issue(tmpl, ca)
}

// issue creates a key and a certificate from tmpl, signed by parent (nil:
// self-signed).
func issue(tmpl *x509.Certificate, parent *KeyPair) (*KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generating serial number: %w", err)
	}
	tmpl.SerialNumber = serial
	signerCert, signerKey := tmpl, crypto.Signer(key)
	if parent != nil {
		signerCert, signerKey = parent.Cert, parent.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, key.Public(), signerKey)
	if err != nil {
		return nil, fmt.Errorf("signing certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing new certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding key: %w", err)
	}
	return &KeyPair{
		Cert:    cert,
		Key:     key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// ParseKeyPair parses a PEM certificate (the first CERTIFICATE block) and
// its PEM private key (PKCS #8, SEC 1 "EC PRIVATE KEY" or PKCS #1 "RSA
// PRIVATE KEY", so that a CA made with openssl can be supplied), and checks
// that they belong together.
func ParseKeyPair(certPEM, keyPEM []byte) (*KeyPair, error) {
	certs, err := ParseCertificates(certPEM)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, errors.New("private key: no PEM block")
	}
	var key any
	switch block.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		return nil, fmt.Errorf("private key (%s): %w", block.Type, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("private key: %T cannot sign", key)
	}
	if !publicKeysEqual(certs[0].PublicKey, signer.Public()) {
		return nil, errors.New("private key does not match the certificate")
	}
	return &KeyPair{Cert: certs[0], Key: signer, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certs[0].Raw}), KeyPEM: keyPEM}, nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	switch a := a.(type) {
	case *ecdsa.PublicKey:
		return a.Equal(b)
	case *rsa.PublicKey:
		return a.Equal(b)
	default:
		return false
	}
}

// ParseCertificates parses every CERTIFICATE block of data. Errors: none
// found, or one that does not parse.
func ParseCertificates(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(out), err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM CERTIFICATE block")
	}
	return out, nil
}

// RenewAt is when c is due for renewal: two thirds of the way from its
// NotBefore to its NotAfter.
func RenewAt(c *x509.Certificate) time.Time {
	life := c.NotAfter.Sub(c.NotBefore)
	return c.NotBefore.Add(life / 3 * 2)
}

// NeedsRenewal reports whether c is at or past RenewAt at now.
func NeedsRenewal(c *x509.Certificate, now time.Time) bool {
	return !now.Before(RenewAt(c))
}

// Covers reports whether c's subject alternative names are exactly dnsNames
// and ips (in any order).
func Covers(c *x509.Certificate, dnsNames []string, ips []net.IP) bool {
	want := slices.Clone(dnsNames)
	have := slices.Clone(c.DNSNames)
	slices.Sort(want)
	slices.Sort(have)
	if !slices.Equal(slices.Compact(want), slices.Compact(have)) {
		return false
	}
	key := func(ip net.IP) string { return string(ip.To16()) }
	wantIPs := make([]string, 0, len(ips))
	for _, ip := range ips {
		wantIPs = append(wantIPs, key(ip))
	}
	haveIPs := make([]string, 0, len(c.IPAddresses))
	for _, ip := range c.IPAddresses {
		haveIPs = append(haveIPs, key(ip))
	}
	slices.Sort(wantIPs)
	slices.Sort(haveIPs)
	return slices.Equal(slices.Compact(wantIPs), slices.Compact(haveIPs))
}

// VerifyServing checks that serving chains to one of roots for every DNS
// name in dnsNames at now (and is a server certificate).
func VerifyServing(serving *x509.Certificate, roots []*x509.Certificate, dnsNames []string, now time.Time) error {
	pool := x509.NewCertPool()
	for _, r := range roots {
		pool.AddCert(r)
	}
	opts := x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if len(dnsNames) == 0 {
		_, err := serving.Verify(opts)
		return err
	}
	for _, n := range dnsNames {
		opts.DNSName = n
		if _, err := serving.Verify(opts); err != nil {
			return err
		}
	}
	return nil
}

// EncodeCertificates writes certs as concatenated PEM CERTIFICATE blocks.
func EncodeCertificates(certs ...*x509.Certificate) []byte {
	var b bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return b.Bytes()
}
