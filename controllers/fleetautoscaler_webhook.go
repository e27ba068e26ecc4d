package controllers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/netfleet/netfleet/api/v1alpha1"
)

// webhookResponseLimit bounds the answer read from a webhook.
const webhookResponseLimit = 1 << 20

// defaultWebhookServicePort is the port of a webhook Service reference without one.
const defaultWebhookServicePort = 8000

// Results of a webhook call, the values of the result label: the set is closed, one per
// AbleToScale reason of a failed call.
var webhookResults = map[string]string{
	"":                                       "ok",
	v1alpha1.ReasonInvalidPolicy:             "invalid_policy",
	v1alpha1.ReasonWebhookTimeout:            "timeout",
	v1alpha1.ReasonWebhookUnreachable:        "unreachable",
	v1alpha1.ReasonWebhookHTTPError:          "http_error",
	v1alpha1.ReasonWebhookMalformedResponse:  "malformed",
	v1alpha1.ReasonWebhookReplicasOutOfRange: "out_of_range",
	v1alpha1.ReasonInvalidCABundle:           "invalid_ca_bundle",
}

var webhookDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name: "netfleet_operator_fleetautoscaler_webhook_duration_seconds",
	Help: "Duration of one call of a FleetAutoscaler's webhook, by result: ok, timeout, unreachable, " +
		"http_error, malformed, out_of_range, invalid_ca_bundle, invalid_policy.",
	Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
}, []string{"result"})

func init() {
	metrics.Registry.MustRegister(webhookDuration)
	for _, r := range webhookResults {
		webhookDuration.WithLabelValues(r)
	}
}

// webhookError is a failed webhook call; reason is the AbleToScale reason it sets.
type webhookError struct {
	reason string
	err    error
}

func (e *webhookError) Error() string { return e.err.Error() }
func (e *webhookError) Unwrap() error { return e.err }

// webhookCaller calls the webhooks of Webhook policies. It keeps one HTTP client per CA bundle,
// so calls to one endpoint reuse their connections.
type webhookCaller struct {
	mu      sync.Mutex
	clients map[[sha256.Size]byte]*http.Client
}

// maxWebhookClients bounds the clients kept; past it they are all dropped and built again as
// needed (CA bundles rarely change).
const maxWebhookClients = 64

func newWebhookCaller() *webhookCaller {
	return &webhookCaller{clients: map[[sha256.Size]byte]*http.Client{}}
}

// call posts req to the policy's endpoint and returns its response. Every failure is a
// *webhookError; nothing about the fleet is changed by a call.
func (w *webhookCaller) call(ctx context.Context, p *v1alpha1.WebhookPolicy, namespace string, req *v1alpha1.FleetAutoscaleRequest) (v1alpha1.FleetAutoscaleResponse, error) {
	start := time.Now()
	resp, err := w.do(ctx, p, namespace, req)
	reason := ""
	if we, ok := errors.AsType[*webhookError](err); ok {
		reason = we.reason
	}
	webhookDuration.WithLabelValues(webhookResults[reason]).Observe(time.Since(start).Seconds())
	return resp, err
}

func (w *webhookCaller) do(ctx context.Context, p *v1alpha1.WebhookPolicy, namespace string, req *v1alpha1.FleetAutoscaleRequest) (v1alpha1.FleetAutoscaleResponse, error) {
	var none v1alpha1.FleetAutoscaleResponse
	url, err := webhookURL(p, namespace)
	if err != nil {
		return none, &webhookError{reason: v1alpha1.ReasonInvalidPolicy, err: err}
	}
	hc, err := w.client(p.CABundle)
	if err != nil {
		return none, &webhookError{reason: v1alpha1.ReasonInvalidCABundle, err: err}
	}
	body, err := json.Marshal(v1alpha1.FleetAutoscaleReview{Request: req})
	if err != nil {
		return none, &webhookError{reason: v1alpha1.ReasonInvalidPolicy, err: fmt.Errorf("encode FleetAutoscaleReview: %w", err)}
	}
	timeout := time.Duration(p.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return none, &webhookError{reason: v1alpha1.ReasonWebhookUnreachable, err: fmt.Errorf("webhook %s: %w", url, err)}
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	hresp, err := hc.Do(hreq)
	if err != nil {
		return none, classifyCallError(ctx, url, timeout, err)
	}
	defer func() { _ = hresp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(hresp.Body, webhookResponseLimit+1))
	switch {
	case err != nil:
		return none, classifyCallError(ctx, url, timeout, err)
	case ctx.Err() != nil:
		// The answer was read as the time ran out (the transport may hand over a response that
		// raced its deadline): an answer not in by the timeout is refused like no answer, so
		// whether a late scaler moves the fleet does not hang on which of the two came first.
		return none, classifyCallError(ctx, url, timeout, ctx.Err())
	case hresp.StatusCode != http.StatusOK:
		return none, &webhookError{reason: v1alpha1.ReasonWebhookHTTPError,
			err: fmt.Errorf("webhook %s answered %s: %s", url, hresp.Status, truncateBody(raw))}
	case len(raw) > webhookResponseLimit:
		return none, &webhookError{reason: v1alpha1.ReasonWebhookMalformedResponse,
			err: fmt.Errorf("webhook %s: answer over %d bytes", url, webhookResponseLimit)}
	}
	out, err := v1alpha1.DecodeFleetAutoscaleResponse(raw, req.UID)
	switch {
	case errors.Is(err, v1alpha1.ErrReplicasOutOfRange):
		return none, &webhookError{reason: v1alpha1.ReasonWebhookReplicasOutOfRange, err: fmt.Errorf("webhook %s: %w", url, err)}
	case err != nil:
		return none, &webhookError{reason: v1alpha1.ReasonWebhookMalformedResponse, err: fmt.Errorf("webhook %s: %w", url, err)}
	}
	return out, nil
}

// classifyCallError tells a call that ran out of time from one that could not be made.
func classifyCallError(ctx context.Context, url string, timeout time.Duration, err error) error {
	var ne net.Error
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return &webhookError{reason: v1alpha1.ReasonWebhookTimeout, err: fmt.Errorf("webhook %s: no answer within %s", url, timeout)}
	}
	return &webhookError{reason: v1alpha1.ReasonWebhookUnreachable, err: fmt.Errorf("webhook %s: %w", url, err)}
}

// truncateBody is the start of an error answer, for the condition's message.
func truncateBody(raw []byte) string {
	const limit = 200
	s := string(bytes.TrimSpace(raw))
	if len(s) > limit {
		s = s[:limit] + "..."
	}
	return strconv.Quote(s)
}

// webhookURL is where a policy's calls go: its URL, or its Service's address in the cluster
// (namespace is the autoscaler's, the default of the Service's).
func webhookURL(p *v1alpha1.WebhookPolicy, namespace string) (string, error) {
	switch {
	case p.URL != nil:
		return *p.URL, nil
	case p.Service != nil:
		s := p.Service
		scheme := "http"
		if len(p.CABundle) > 0 {
			scheme = "https"
		}
		ns := s.Namespace
		if ns == "" {
			ns = namespace
		}
		port := s.Port
		if port == 0 {
			port = defaultWebhookServicePort
		}
		path := s.Path
		if path == "" {
			path = "/"
		}
		host := net.JoinHostPort(s.Name+"."+ns+".svc", strconv.Itoa(int(port)))
		return scheme + "://" + host + path, nil
	default:
		// The CRD refuses such a policy.
		return "", errors.New("spec.policy.webhook: neither url nor service is set")
	}
}

// client returns the HTTP client that checks servers against caBundle (the system roots when it
// is empty).
func (w *webhookCaller) client(caBundle []byte) (*http.Client, error) {
	key := sha256.Sum256(caBundle)
	w.mu.Lock()
	defer w.mu.Unlock()
	if hc, ok := w.clients[key]; ok {
		return hc, nil
	}
	tr, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return nil, errors.New("http.DefaultTransport is not an *http.Transport")
	}
	tr = tr.Clone()
	tr.MaxIdleConnsPerHost = 4
	if len(caBundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caBundle) {
			return nil, errors.New("spec.policy.webhook.caBundle: no PEM-encoded certificate in it")
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	if len(w.clients) >= maxWebhookClients {
		clear(w.clients)
	}
	// A redirect is answered as it is (an HTTP error): a POST is not followed elsewhere.
	hc := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	w.clients[key] = hc
	return hc, nil
}
