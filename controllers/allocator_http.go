package controllers

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netfleet/netfleet/api/v1alpha1"
)

const (
	// AllocatePath is the allocator endpoint: POST a GameServerAllocation, get it back with its
	// status filled in.
	AllocatePath = "/v1/gameserverallocations"
	// AllocatorTokenSecretKey is the key of the bearer token in the allocator's Secret.
	AllocatorTokenSecretKey = "token"
	// maxAllocateBody bounds a request body.
	maxAllocateBody = 64 << 10
)

// AllocatorServerOptions configures the allocator endpoint. Zero fields take the defaults below.
type AllocatorServerOptions struct {
	// Addr is the address to listen on, e.g. ":8090".
	Addr string
	// TokenSecret is the Secret whose key "token" holds the bearer token callers must send. The
	// operator creates it with a random token when it is missing.
	TokenSecret types.NamespacedName
	// CertFile and KeyFile, when both set, make the endpoint serve HTTPS.
	CertFile, KeyFile string
	// TokenRefresh is how often the Secret is read again, so a rotated token takes effect.
	// Default 30s.
	TokenRefresh time.Duration
}

// AllocatorServer is the allocator's HTTP endpoint, for matchmakers that need the answer in the
// same call. It runs in every operator replica, leader or not: the resourceVersion-guarded mark
// of the Allocator is what keeps two replicas from handing out one server.
type AllocatorServer struct {
	alloc *Allocator
	opts  AllocatorServerOptions
	api   client.Reader
	write client.Client

	mu    sync.RWMutex
	token []byte
}

// NewAllocatorServer returns the endpoint serving alloc. It reads the token Secret through api
// and creates it through write.
func NewAllocatorServer(alloc *Allocator, api client.Reader, write client.Client, opts AllocatorServerOptions) *AllocatorServer {
	if opts.TokenRefresh <= 0 {
		opts.TokenRefresh = 30 * time.Second
	}
	return &AllocatorServer{alloc: alloc, opts: opts, api: api, write: write}
}

// NeedLeaderElection is false: every replica answers allocations.
func (s *AllocatorServer) NeedLeaderElection() bool { return false }

// Start listens on opts.Addr and serves until ctx ends (a manager.Runnable).
func (s *AllocatorServer) Start(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.opts.Addr)
	if err != nil {
		return fmt.Errorf("allocator endpoint: listen %s: %w", s.opts.Addr, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx ends, reading the token Secret every opts.TokenRefresh. Until the
// token is known, every request is answered 503.
func (s *AllocatorServer) Serve(ctx context.Context, ln net.Listener) error {
	log := ctrl.LoggerFrom(ctx).WithName("allocator")
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	// Ends the token loop (and shuts the server down) however Serve returns.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() {
		for {
			if err := s.loadToken(ctx); err != nil && ctx.Err() == nil {
				log.Error(err, "allocator token not loaded; requests are refused until it is", "secret", s.opts.TokenSecret.String())
			}
			select {
			case <-ctx.Done():
				shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := srv.Shutdown(shutdown); err != nil {
					log.Error(err, "allocator endpoint shutdown")
				}
				return
			case <-time.After(s.opts.TokenRefresh):
			}
		}
	})
	log.Info("allocator endpoint listening", "address", ln.Addr().String(), "tls", s.tls())
	var err error
	if s.tls() {
		err = srv.ServeTLS(ln, s.opts.CertFile, s.opts.KeyFile)
	} else {
		err = srv.Serve(ln)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("allocator endpoint: %w", err)
}

func (s *AllocatorServer) tls() bool { return s.opts.CertFile != "" && s.opts.KeyFile != "" }

// +kubebuilder:rbac:groups="",resources=secrets,resourceNames=netfleet-allocator-token,verbs=get

// loadToken reads the token Secret, creating it with a random token when it is missing.
func (s *AllocatorServer) loadToken(ctx context.Context) error {
	key := s.opts.TokenSecret
	var sec corev1.Secret
	err := s.api.Get(ctx, key, &sec)
	if apierrors.IsNotFound(err) {
		tok, genErr := newAdminToken()
		if genErr != nil {
			return genErr
		}
		sec = corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name: key.Name, Namespace: key.Namespace,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "netfleet-operator"},
			},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{AllocatorTokenSecretKey: []byte(tok)},
		}
		err = s.write.Create(ctx, &sec)
		if apierrors.IsAlreadyExists(err) {
			err = s.api.Get(ctx, key, &sec)
		}
	}
	if err != nil {
		return fmt.Errorf("allocator token secret %s: %w", key, err)
	}
	tok := sec.Data[AllocatorTokenSecretKey]
	if len(tok) == 0 {
		return fmt.Errorf("allocator token secret %s has no key %s", key, AllocatorTokenSecretKey)
	}
	s.mu.Lock()
	s.token = tok
	s.mu.Unlock()
	return nil
}

// authorized reports whether the request carries the token, compared in constant time.
func (s *AllocatorServer) authorized(r *http.Request) (known, ok bool) {
	s.mu.RLock()
	tok := s.token
	s.mu.RUnlock()
	if len(tok) == 0 {
		return false, false
	}
	got, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return true, found && subtle.ConstantTimeCompare([]byte(got), tok) == 1
}

// ServeHTTP answers POST /v1/gameserverallocations: the body is a GameServerAllocation (only
// metadata.namespace, default "default", and spec are read); the answer is the same object with
// its status — 200 for Allocated and UnAllocated alike, 422 for a request that cannot be served
// as written. Nothing is stored, unless the request carries an Idempotency-Key (serveKeyed).
func (s *AllocatorServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != AllocatePath {
		writeError(w, http.StatusNotFound, "not found; POST "+AllocatePath)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "use POST")
		return
	}
	switch known, ok := s.authorized(r); {
	case !known:
		writeError(w, http.StatusServiceUnavailable, "the allocator has not loaded its token yet")
		return
	case !ok:
		w.Header().Set("WWW-Authenticate", `Bearer realm="netfleet-allocator"`)
		writeError(w, http.StatusUnauthorized, "missing or wrong bearer token")
		return
	}
	req, err := v1alpha1.DecodeGameServerAllocation(http.MaxBytesReader(w, r.Body, maxAllocateBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if key, keyed := r.Header[IdempotencyKeyHeader]; keyed {
		s.serveKeyed(w, r, req, strings.Join(key, ","))
		return
	}
	// The allocation has no object; its uid, which the server is marked with and the connect
	// tokens are bound to, is made here and answered in metadata.uid.
	req.UID = uuid.NewUUID()
	st, err := s.alloc.Allocate(r.Context(), req.Namespace, req.Spec, allocSourceHTTP, req.UID)
	if err != nil {
		ctrl.LoggerFrom(r.Context()).Error(err, "allocation failed", "namespace", req.Namespace)
		writeError(w, http.StatusServiceUnavailable, "allocation failed: "+err.Error())
		return
	}
	req.Status = st
	code := http.StatusOK
	if st.Reason == v1alpha1.AllocationReasonInvalid {
		code = http.StatusUnprocessableEntity
	}
	writeJSON(w, code, req)
}

// allocatorError is the body of an error answer.
type allocatorError struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, allocatorError{Error: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	raw, err := json.Marshal(v)
	if err != nil {
		code, raw = http.StatusInternalServerError, []byte(`{"error":"encode answer"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	// A failed write means the caller went away; there is no one left to tell.
	_, _ = w.Write(append(raw, '\n'))
}
