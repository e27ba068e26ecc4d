package controllers

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netfleet/netfleet/api/connecttoken"
	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/api/v1alpha1"
)

// ConnectKeysSecretName is the Secret, one per namespace, holding the connect-token keys of every
// fleet of the namespace. Only the operator reads it (RBAC grants it on this one name); the game
// servers get their fleet's keys over the admin API, never by mounting it.
const ConnectKeysSecretName = "netfleet-connect-keys"

// connectKeyGroup is the Secret key under which a GameServer's keys are kept: its fleet's, so
// that every server of a fleet holds the same keys, or its own for a server of no fleet.
func connectKeyGroup(gs *v1alpha1.GameServer) string {
	if f := gs.Labels[v1alpha1.LabelFleet]; f != "" {
		return "fleet." + f
	}
	return "gameserver." + gs.Name
}

// storedConnectKey is one key as the Secret holds it.
type storedConnectKey struct {
	netcode.ConnectKey `json:",inline"`
	// Created is when the operator made the key; the rotation is timed from it.
	Created time.Time `json:"created"`
}

// ConnectKeyOptions time the rotation of connect-token keys.
type ConnectKeyOptions struct {
	// RotationPeriod is how long a key signs before the operator adds the next one. Default 720h
	// (30 days).
	RotationPeriod time.Duration
	// Propagation is how long a new key is held back from signing after it is added, so that
	// every server has it first (the GameServer reconciler pushes keys at every check, every
	// VerifyInterval). Default 1m.
	Propagation time.Duration
	// CacheTTL is how long the operator uses the keys it read before reading the Secret again.
	// Default 5s.
	CacheTTL time.Duration
}

func (o *ConnectKeyOptions) setDefaults() {
	if o.RotationPeriod <= 0 {
		o.RotationPeriod = 720 * time.Hour
	}
	if o.Propagation <= 0 {
		o.Propagation = time.Minute
	}
	if o.CacheTTL <= 0 {
		o.CacheTTL = 5 * time.Second
	}
}

// maxTokenTTL is the longest connectTokens.ttlSeconds allows: a retired key is kept until no token
// it signed can still be valid.
var maxTokenTTL = func() time.Duration {
	_, hi, ok := netcode.FieldRange("connectTokens.ttlSeconds")
	if !ok {
		panic("netcode: connectTokens.ttlSeconds has no range")
	}
	return time.Duration(hi) * time.Second
}()

// planConnectKeys is the rotation policy, with no I/O: given a group's keys (newest first) at now,
// it returns the keys to keep (newest first, at most connecttoken.MaxKeys) and the one to sign with, and
// whether the keys changed. newKey makes a key of an id.
//
//   - No key yet: the first one is made, and signs at once (no server can hold an older one).
//   - The newest key is RotationPeriod old: a new key is added in front, the oldest beyond
//     connecttoken.MaxKeys dropped.
//   - A key signs once it is Propagation old; until then the key before it still does, so a
//     server that has not received the new key yet still accepts every token issued.
//   - The older key is dropped once the newer has signed for longer than a token can live.
func planConnectKeys(keys []storedConnectKey, now time.Time, o ConnectKeyOptions, newKey func(id uint32) (storedConnectKey, error)) ([]storedConnectKey, storedConnectKey, bool, error) {
	changed := false
	if len(keys) == 0 {
		k, err := newKey(1)
		if err != nil {
			return nil, storedConnectKey{}, false, err
		}
		return []storedConnectKey{k}, k, true, nil
	}
	keys = slices.Clone(keys)
	if !now.Before(keys[0].Created.Add(o.RotationPeriod)) {
		k, err := newKey(keys[0].ID + 1)
		if err != nil {
			return nil, storedConnectKey{}, false, err
		}
		keys = append([]storedConnectKey{k}, keys...)
		changed = true
	}
	if len(keys) > connecttoken.MaxKeys {
		keys, changed = keys[:connecttoken.MaxKeys], true
	}
	signsFrom := keys[0].Created.Add(o.Propagation)
	if len(keys) > 1 && !now.Before(signsFrom.Add(maxTokenTTL+o.Propagation)) {
		keys, changed = keys[:1], true
	}
	signer := keys[0]
	if len(keys) > 1 && now.Before(signsFrom) {
		signer = keys[1]
	}
	return keys, signer, changed, nil
}

// newConnectKey makes a key of id with a secret from crypto/rand.
func newConnectKey(now time.Time) func(id uint32) (storedConnectKey, error) {
	return func(id uint32) (storedConnectKey, error) {
		secret := make([]byte, connecttoken.KeyBytes)
		if _, err := rand.Read(secret); err != nil {
			return storedConnectKey{}, fmt.Errorf("generate connect key: %w", err)
		}
		return storedConnectKey{ConnectKey: netcode.ConnectKey{ID: id, Secret: secret}, Created: now.UTC().Truncate(time.Second)}, nil
	}
}

// ConnectKeys is a group's keys as the operator uses them: all of them, newest first, for the
// servers, and the one to sign with.
type ConnectKeys struct {
	All    []netcode.ConnectKey
	Signer connecttoken.Key
}

// IDs returns the keys' ids, newest first.
func (k *ConnectKeys) IDs() []int64 {
	ids := make([]int64, len(k.All))
	for i, c := range k.All {
		ids[i] = int64(c.ID)
	}
	return ids
}

// ConnectKeyStore reads, creates and rotates the connect-token keys of each namespace's
// ConnectKeysSecretName, caching a namespace's keys for CacheTTL. It is safe for concurrent use;
// two operators writing the Secret at once are kept apart by its resourceVersion.
type ConnectKeyStore struct {
	reader client.Reader // reads through to the API server
	writer client.Client
	opts   ConnectKeyOptions
	now    func() time.Time

	mu     sync.Mutex
	cached map[string]cachedKeys // by namespace
}

type cachedKeys struct {
	groups map[string][]storedConnectKey
	at     time.Time
}

// NewConnectKeyStore returns a store reading through reader and writing through writer.
func NewConnectKeyStore(reader client.Reader, writer client.Client, opts ConnectKeyOptions) *ConnectKeyStore {
	opts.setDefaults()
	return &ConnectKeyStore{reader: reader, writer: writer, opts: opts, now: time.Now, cached: map[string]cachedKeys{}}
}

// +kubebuilder:rbac:groups="",resources=secrets,resourceNames=netfleet-connect-keys,verbs=get;update

// Get returns the keys of group in namespace ns, creating or rotating them (and writing the
// Secret) when the rotation policy says so.
func (s *ConnectKeyStore) Get(ctx context.Context, ns, group string) (ConnectKeys, error) {
	now := s.now()
	s.mu.Lock()
	c, ok := s.cached[ns]
	s.mu.Unlock()
	if ok && now.Sub(c.at) < s.opts.CacheTTL {
		if keys, signer, changed, err := planConnectKeys(c.groups[group], now, s.opts, newConnectKey(now)); err == nil && !changed {
			return usable(keys, signer), nil
		}
	}
	for range 5 {
		keys, signer, err := s.load(ctx, ns, group, now)
		if err == nil {
			return usable(keys, signer), nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			return ConnectKeys{}, err
		}
	}
	return ConnectKeys{}, fmt.Errorf("secret %s/%s: kept changing while the connect keys were written", ns, ConnectKeysSecretName)
}

func usable(keys []storedConnectKey, signer storedConnectKey) ConnectKeys {
	out := ConnectKeys{All: make([]netcode.ConnectKey, len(keys)), Signer: connecttoken.Key{ID: signer.ID, Secret: [connecttoken.KeyBytes]byte(signer.Secret)}}
	for i, k := range keys {
		out.All[i] = k.ConnectKey
	}
	return out
}

// load reads the Secret, applies the rotation policy to group, writes the Secret back if that
// changed it, and caches what it holds.
func (s *ConnectKeyStore) load(ctx context.Context, ns, group string, now time.Time) ([]storedConnectKey, storedConnectKey, error) {
	key := types.NamespacedName{Namespace: ns, Name: ConnectKeysSecretName}
	var sec corev1.Secret
	err := s.reader.Get(ctx, key, &sec)
	missing := apierrors.IsNotFound(err)
	if err != nil && !missing {
		return nil, storedConnectKey{}, fmt.Errorf("get secret %s: %w", key, err)
	}
	groups := map[string][]storedConnectKey{}
	for g, raw := range sec.Data {
		var keys []storedConnectKey
		if err := json.Unmarshal(raw, &keys); err != nil {
			return nil, storedConnectKey{}, fmt.Errorf("secret %s, key %s: %w", key, g, err)
		}
		for i, k := range keys {
			if len(k.Secret) != connecttoken.KeyBytes {
				return nil, storedConnectKey{}, fmt.Errorf("secret %s, key %s: key %d (id %d) is %d bytes, want %d", key, g, i, k.ID, len(k.Secret), connecttoken.KeyBytes)
			}
		}
		groups[g] = keys
	}
	keys, signer, changed, err := planConnectKeys(groups[group], now, s.opts, newConnectKey(now))
	if err != nil {
		return nil, storedConnectKey{}, err
	}
	if changed {
		raw, err := json.Marshal(keys)
		if err != nil {
			return nil, storedConnectKey{}, fmt.Errorf("encode connect keys: %w", err)
		}
		if missing {
			sec = corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: ConnectKeysSecretName, Namespace: ns,
					Labels: map[string]string{"app.kubernetes.io/managed-by": "netfleet-operator"}},
				Type: corev1.SecretTypeOpaque,
			}
		}
		if sec.Data == nil {
			sec.Data = map[string][]byte{}
		}
		sec.Data[group] = raw
		if missing {
			err = s.writer.Create(ctx, &sec)
		} else {
			err = s.writer.Update(ctx, &sec)
		}
		if err != nil {
			return nil, storedConnectKey{}, fmt.Errorf("write secret %s: %w", key, err)
		}
		groups[group] = keys
	}
	s.mu.Lock()
	s.cached[ns] = cachedKeys{groups: groups, at: now}
	s.mu.Unlock()
	return keys, signer, nil
}
