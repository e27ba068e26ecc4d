package controllers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// AdminTokenSecretName is the Secret, one per namespace, holding the bearer token of the admin
	// API of every game server in that namespace. The operator creates it when it is missing.
	AdminTokenSecretName = "netfleet-admin-token"
	// AdminTokenSecretKey is the key of the token in that Secret.
	AdminTokenSecretKey = "token"
	// adminTokenBytes is the token's entropy; it is stored hex-encoded.
	adminTokenBytes = 32
)

// tokenStore hands out each namespace's admin token, creating its Secret when missing. It reads
// Secrets by name (RBAC grants get on that one name only) and keeps the tokens in memory, so the
// operator neither lists nor watches Secrets.
type tokenStore struct {
	reader client.Reader // reads through to the API server
	writer client.Client

	mu     sync.Mutex
	tokens map[string]string // namespace -> token
}

func newTokenStore(reader client.Reader, writer client.Client) *tokenStore {
	return &tokenStore{reader: reader, writer: writer, tokens: map[string]string{}}
}

// get returns the token of namespace ns. Concurrent first calls for one namespace may each read
// or create the Secret; creation is idempotent through AlreadyExists.
func (s *tokenStore) get(ctx context.Context, ns string) (string, error) {
	s.mu.Lock()
	tok, ok := s.tokens[ns]
	s.mu.Unlock()
	if ok {
		return tok, nil
	}
	tok, err := s.load(ctx, ns)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	s.tokens[ns] = tok
	s.mu.Unlock()
	return tok, nil
}

// forget drops the remembered token of ns, e.g. after a server refused it.
func (s *tokenStore) forget(ns string) {
	s.mu.Lock()
	delete(s.tokens, ns)
	s.mu.Unlock()
}

func (s *tokenStore) load(ctx context.Context, ns string) (string, error) {
	key := types.NamespacedName{Namespace: ns, Name: AdminTokenSecretName}
	var sec corev1.Secret
	err := s.reader.Get(ctx, key, &sec)
	if apierrors.IsNotFound(err) {
		tok, genErr := newAdminToken()
		if genErr != nil {
			return "", genErr
		}
		sec = corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name: AdminTokenSecretName, Namespace: ns,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "netfleet-operator"},
			},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{AdminTokenSecretKey: []byte(tok)},
		}
		err = s.writer.Create(ctx, &sec)
		if err == nil {
			return tok, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("create secret %s: %w", key, err)
		}
		err = s.reader.Get(ctx, key, &sec)
	}
	if err != nil {
		return "", fmt.Errorf("get secret %s: %w", key, err)
	}
	tok := string(sec.Data[AdminTokenSecretKey])
	if tok == "" {
		return "", errors.New("secret " + key.String() + " has no key " + AdminTokenSecretKey)
	}
	return tok, nil
}

func newAdminToken() (string, error) {
	b := make([]byte, adminTokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate admin token: %w", err)
	}
	return hex.EncodeToString(b), nil
}
