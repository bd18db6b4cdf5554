package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/klog/v2"
)

// ManagerOptions configure a Manager.
type ManagerOptions struct {
	// Namespace and SecretName name the Secret holding the certificates.
	// Required.
	Namespace, SecretName string
	// Spec is what the certificates must be. Required.
	Spec Spec
	// CheckInterval is the longest time between two Syncs in Run (default
	// 10 minutes); Run also wakes when a certificate becomes due for renewal.
	CheckInterval time.Duration
	// RetryInterval is the time before Run retries a failed Sync (default
	// 10 seconds).
	RetryInterval time.Duration
	// CallTimeout bounds one Sync (its API calls and OnCABundle); default 30s.
	CallTimeout time.Duration
	// OnCABundle, when set, is called on every Sync with the CA bundle (PEM)
	// before a new serving certificate is served, so that the API server
	// trusts it first: it patches the webhook configurations' caBundle and
	// should do nothing when they already hold it.
	OnCABundle func(ctx context.Context, caBundle []byte) error
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// Registerer, when set, gets the metrics
	// multinet_webhook_cert_rotations_total (Secret writes) and
	// multinet_webhook_serving_cert_expiry_timestamp_seconds.
	Registerer prometheus.Registerer
}

// Manager keeps a CA and serving certificate in a Secret shared by all
// replicas, renews them (see Plan), and serves the current serving
// certificate to the TLS server through GetCertificate.
type Manager struct {
	secrets   corev1client.SecretInterface
	o         ManagerOptions
	current   atomic.Pointer[served]
	rotations prometheus.Counter
	expiry    prometheus.Gauge
	// failed says whether the last Sync returned an error: Run retries
	// after RetryInterval from its start when the caller's first Sync (such
	// as publishing the CA bundle to webhook configurations that are not
	// created yet) failed.
	failed atomic.Bool
}

// served is what the Manager serves.
type served struct {
	cert     *tls.Certificate
	bundle   []byte
	nextWake time.Time // earliest RenewAt of the CA and the serving certificate
}

// NewManager returns a Manager of the Secret o.Namespace/o.SecretName,
// read and written through secrets (a clientset's CoreV1()). Errors: a
// missing or invalid option, or a metric that cannot be registered.
func NewManager(secrets corev1client.SecretsGetter, o ManagerOptions) (*Manager, error) {
	if o.Namespace == "" || o.SecretName == "" {
		return nil, errors.New("certificate manager: Namespace and SecretName are required")
	}
	if err := o.Spec.Check(); err != nil {
		return nil, err
	}
	if o.CheckInterval <= 0 {
		o.CheckInterval = 10 * time.Minute
	}
	if o.RetryInterval <= 0 {
		o.RetryInterval = 10 * time.Second
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 30 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	m := &Manager{
		secrets: secrets.Secrets(o.Namespace),
		o:       o,
		rotations: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "multinet", Subsystem: "webhook", Name: "cert_rotations_total",
			Help: "Writes of the webhook certificate Secret by this process (first fill and renewals).",
		}),
		expiry: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "multinet", Subsystem: "webhook", Name: "serving_cert_expiry_timestamp_seconds",
			Help: "NotAfter of the serving certificate being served, in Unix seconds.",
		}),
	}
	if o.Registerer != nil {
		for _, c := range []prometheus.Collector{m.rotations, m.expiry} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("registering certificate metrics: %w", err)
			}
		}
	}
	return m, nil
}

// GetCertificate returns the serving certificate, for tls.Config. Error
// before the first successful Sync.
func (m *Manager) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	s := m.current.Load()
	if s == nil {
		return nil, errors.New("serving certificate not loaded yet")
	}
	return s.cert, nil
}

// CABundle returns the CA bundle (PEM) of the served certificate, nil
// before the first successful Sync.
func (m *Manager) CABundle() []byte {
	if s := m.current.Load(); s != nil {
		return bytes.Clone(s.bundle)
	}
	return nil
}

// Ready returns nil once a serving certificate is loaded (for /readyz).
func (m *Manager) Ready() error {
	if m.current.Load() == nil {
		return errors.New("serving certificate not loaded yet")
	}
	return nil
}

// Sync reads the Secret, renews what Plan says (updating the Secret, which
// must exist: ErrSecretMissing otherwise; on a conflict with another replica it starts over with what that
// replica wrote), calls OnCABundle and then serves the Secret's serving
// certificate. When OnCABundle fails, a new serving certificate is loaded
// only if nothing is served yet or the served one expires within
// RetryInterval; the error is returned either way.
func (m *Manager) Sync(ctx context.Context) error {
	err := m.sync(ctx)
	m.failed.Store(err != nil)
	return err
}

func (m *Manager) sync(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, m.o.CallTimeout)
	defer cancel()
	st, err := m.reconcileSecret(ctx)
	if err != nil {
		return err
	}
	now := m.o.Now()
	bundle := st.CABundle(now)
	var cbErr error
	if m.o.OnCABundle != nil {
		if cbErr = m.o.OnCABundle(ctx, bundle); cbErr != nil {
			cbErr = fmt.Errorf("publishing CA bundle: %w", cbErr)
		}
	}
	cur := m.current.Load()
	if cbErr != nil && cur != nil && cur.cert.Leaf.NotAfter.After(now.Add(m.o.RetryInterval)) {
		return cbErr
	}
	cert, err := tls.X509KeyPair(st.Serving.CertPEM, st.Serving.KeyPEM)
	if err != nil {
		return fmt.Errorf("loading serving certificate: %w", err)
	}
	cert.Leaf = st.Serving.Cert
	wake := RenewAt(st.Serving.Cert)
	if r := RenewAt(st.CA.Cert); r.Before(wake) {
		wake = r
	}
	if cur == nil || !bytes.Equal(cur.cert.Certificate[0], cert.Certificate[0]) {
		klog.FromContext(ctx).Info("serving certificate loaded", "secret", klog.KRef(m.o.Namespace, m.o.SecretName),
			"notAfter", st.Serving.Cert.NotAfter, "renewAt", RenewAt(st.Serving.Cert), "caNotAfter", st.CA.Cert.NotAfter)
	}
	m.current.Store(&served{cert: &cert, bundle: bundle, nextWake: wake})
	m.expiry.Set(float64(st.Serving.Cert.NotAfter.Unix()))
	return cbErr
}

// ErrSecretMissing is returned (wrapped) by Sync when the certificate Secret
// does not exist: the Manager fills a Secret the install ships and never
// creates one (deploy/base/webhook-rbac.yaml gives no Secret create).
var ErrSecretMissing = errors.New("certificate Secret does not exist")

// reconcileSecret brings the Secret to Plan's state and returns it. The
// Secret must exist (empty, as the manifests ship it, or filled by an
// earlier Sync): a missing one is ErrSecretMissing, never created.
func (m *Manager) reconcileSecret(ctx context.Context) (*State, error) {
	ref := klog.KRef(m.o.Namespace, m.o.SecretName)
	const attempts = 5
	for range attempts {
		sec, err := m.secrets.Get(ctx, m.o.SecretName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: %s (the install ships it empty and the webhook fills it; "+
				"create it with `kubectl -n %s create secret generic %s`, or re-apply the manifests)",
				ErrSecretMissing, ref, m.o.Namespace, m.o.SecretName)
		}
		if err != nil {
			return nil, fmt.Errorf("reading certificate Secret %s: %w", ref, err)
		}
		st, reasons, err := Plan(sec.Data, m.o.Spec, m.o.Now())
		if err != nil {
			return nil, fmt.Errorf("certificate Secret %s: %w", ref, err)
		}
		if len(reasons) == 0 {
			return st, nil
		}
		sec = sec.DeepCopy()
		sec.Data = st.Data()
		_, err = m.secrets.Update(ctx, sec, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue // another replica wrote it first: use theirs
		}
		if err != nil {
			return nil, fmt.Errorf("writing certificate Secret %s: %w", ref, err)
		}
		m.rotations.Inc()
		klog.FromContext(ctx).Info("certificate Secret written", "secret", ref, "reasons", reasons)
		return st, nil
	}
	return nil, fmt.Errorf("certificate Secret %s: still conflicting after %d attempts", ref, attempts)
}

// Run calls Sync until ctx ends: after CheckInterval, or earlier when a
// certificate becomes due for renewal, or after RetryInterval when Sync
// failed, the caller's Sync before Run included. It returns ctx's error.
// Call Sync once before Run to fail fast.
func (m *Manager) Run(ctx context.Context) error {
	failing := m.failed.Load()
	for {
		wait := m.o.CheckInterval
		if failing {
			wait = m.o.RetryInterval
		} else if s := m.current.Load(); s != nil {
			if d := s.nextWake.Sub(m.o.Now()); d < wait {
				wait = max(d, time.Second)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		err := m.Sync(ctx)
		failing = err != nil
		if failing && ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "certificate sync failed", "retryIn", m.o.RetryInterval)
		}
	}
}
