package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/netfleet/netfleet/api/v1alpha1"
)

const (
	// IdempotencyKeyHeader names an allocation request, so that sending it again (after a
	// timeout or a dropped connection) returns the first answer instead of allocating another
	// server. Go's HTTP client retries a POST that carries it by itself.
	IdempotencyKeyHeader = "Idempotency-Key"
	// IdempotentReplayedHeader is set to "true" on an answer that was served for an earlier
	// request with the same key.
	IdempotentReplayedHeader = "Idempotent-Replayed"
	// maxIdempotencyKey bounds a key's length.
	maxIdempotencyKey = 255
	// keyedWait is the longest a keyed request waits for its allocation to be served; past it,
	// the answer is 503 and the same key fetches the result later.
	keyedWait = 10 * time.Second
	// DefaultIdempotencyTTL is how long an allocation record is kept by default.
	DefaultIdempotencyTTL = 10 * time.Minute
)

var errKeyReused = errors.New("the Idempotency-Key was used for another request in this namespace")

// idempotencyRecordName is the name of the record of key: a hash, since a key may hold any
// printable characters.
func idempotencyRecordName(key string) (name, hash string) {
	sum := sha256.Sum256([]byte(key))
	hash = hex.EncodeToString(sum[:16])
	return v1alpha1.IdempotencyRecordPrefix + hash, hash
}

// validIdempotencyKey checks a key: 1 to maxIdempotencyKey printable ASCII characters.
func validIdempotencyKey(key string) error {
	if len(key) == 0 || len(key) > maxIdempotencyKey {
		return fmt.Errorf("%s must be 1 to %d characters, got %d", IdempotencyKeyHeader, maxIdempotencyKey, len(key))
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("%s must be printable ASCII; byte %d is %#x", IdempotencyKeyHeader, i, c)
		}
	}
	return nil
}

// serveKeyed answers a request that carries an Idempotency-Key. Its record, a
// GameServerAllocation named after the key, is created once: the operator's allocation
// controller serves it as it serves any GameServerAllocation, and every request with the key —
// the first, its retries, concurrent duplicates, through any operator replica — waits for that
// one result and answers it. A key sent again with another spec is refused (422).
func (s *AllocatorServer) serveKeyed(w http.ResponseWriter, r *http.Request, req *v1alpha1.GameServerAllocation, key string) {
	if err := validIdempotencyKey(key); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	spec, err := json.Marshal(&req.Spec)
	if err != nil {
		writeError(w, http.StatusBadRequest, "encode spec: "+err.Error())
		return
	}
	specSum := sha256.Sum256(spec)
	request := hex.EncodeToString(specSum[:])
	ctx, cancel := context.WithTimeout(r.Context(), keyedWait)
	defer cancel()
	name, hash := idempotencyRecordName(key)
	rec := &v1alpha1.GameServerAllocation{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: req.Namespace,
			Name:      name,
			Labels:    map[string]string{v1alpha1.LabelIdempotencyKey: hash},
			Annotations: map[string]string{
				v1alpha1.AnnotationIdempotencyKey:     key,
				v1alpha1.AnnotationIdempotencyRequest: request,
			},
		},
		Spec: req.Spec,
	}
	replayed := false
	switch err := s.write.Create(ctx, rec); {
	case apierrors.IsAlreadyExists(err):
		replayed = true
	case apierrors.IsInvalid(err), apierrors.IsNotFound(err):
		// A spec the API server refuses, or a namespace that does not exist.
		writeError(w, http.StatusUnprocessableEntity, err.Error())
		return
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, "record the allocation request: "+err.Error())
		return
	}
	got, err := s.waitServed(ctx, types.NamespacedName{Namespace: req.Namespace, Name: name}, request)
	switch {
	case errors.Is(err, errKeyReused):
		writeError(w, http.StatusUnprocessableEntity, fmt.Sprintf("%v (record %s)", err, name))
		return
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("allocation %s not served yet (%v); send the same %s again for its result", name, err, IdempotencyKeyHeader))
		return
	}
	if replayed {
		allocationReplays.Inc()
		w.Header().Set(IdempotentReplayedHeader, "true")
	}
	got.ManagedFields = nil // the API server's bookkeeping, of no use to the requester
	code := http.StatusOK
	if got.Status.Reason == v1alpha1.AllocationReasonInvalid {
		code = http.StatusUnprocessableEntity
	}
	writeJSON(w, code, got)
}

// waitServed reads the record key from the API server until it has its result, backing off from
// 5 to 100 ms. It returns errKeyReused if the record is of another request than the one whose
// spec has the hash request: the hash is of the spec as the requester sent it, so what the API
// server may fill in does not count.
func (s *AllocatorServer) waitServed(ctx context.Context, key types.NamespacedName, request string) (*v1alpha1.GameServerAllocation, error) {
	got := &v1alpha1.GameServerAllocation{}
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		if err := s.api.Get(ctx, key, got); err != nil {
			return nil, err
		}
		if got.Annotations[v1alpha1.AnnotationIdempotencyRequest] != request {
			return nil, errKeyReused
		}
		if got.Status.State != "" {
			return got, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// IdempotencyRecordReconciler deletes the records of keyed allocation requests TTL after they
// were created: a key sent again within the TTL gets the first answer, after it a new
// allocation. It runs in the leader only.
type IdempotencyRecordReconciler struct {
	client.Client
	TTL time.Duration
}

// NewIdempotencyRecordReconciler returns the reconciler, with DefaultIdempotencyTTL for a TTL
// of 0.
func NewIdempotencyRecordReconciler(mgr ctrl.Manager, ttl time.Duration) *IdempotencyRecordReconciler {
	if ttl <= 0 {
		ttl = DefaultIdempotencyTTL
	}
	return &IdempotencyRecordReconciler{Client: mgr.GetClient(), TTL: ttl}
}

// SetupWithManager registers the reconciler for the GameServerAllocations that are records.
func (r *IdempotencyRecordReconciler) SetupWithManager(mgr ctrl.Manager) error {
	record := predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, ok := o.GetLabels()[v1alpha1.LabelIdempotencyKey]
		return ok
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.GameServerAllocation{}, builder.WithPredicates(record)).
		Named("idempotency-record").
		Complete(r)
}

// +kubebuilder:rbac:groups=netfleet.io,resources=gameserverallocations,verbs=create;delete

// Reconcile deletes a record once it is TTL old, and otherwise looks again then.
func (r *IdempotencyRecordReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	a := &v1alpha1.GameServerAllocation{}
	if err := r.Get(ctx, req.NamespacedName, a); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if _, ok := a.Labels[v1alpha1.LabelIdempotencyKey]; !ok || !a.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	if left := r.TTL - time.Since(a.CreationTimestamp.Time); left > 0 {
		return ctrl.Result{RequeueAfter: left}, nil
	}
	err := r.Delete(ctx, a, client.Preconditions{UID: &a.UID})
	if err = client.IgnoreNotFound(err); err != nil {
		return ctrl.Result{}, fmt.Errorf("delete allocation record %s: %w", req.NamespacedName, err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("allocation record expired", "state", a.Status.State, "gameserver", a.Status.GameServerName)
	return ctrl.Result{}, nil
}
