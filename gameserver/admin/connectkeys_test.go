package admin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/netfleet/netfleet/api/connecttoken"
	"github.com/netfleet/netfleet/api/netcode"
)

// keysRuntime is a fakeRuntime that also holds connect keys, as the broadcaster does.
type keysRuntime struct {
	fakeRuntime
	kmu    sync.Mutex
	keys   []connecttoken.Key
	server netip.AddrPort
	sets   int
}

func (k *keysRuntime) SetConnectKeys(_ context.Context, keys []connecttoken.Key, server netip.AddrPort) error {
	k.kmu.Lock()
	defer k.kmu.Unlock()
	k.keys, k.server = keys, server
	k.sets++
	return nil
}

func (k *keysRuntime) ConnectKeys(context.Context) ([]uint32, netip.AddrPort, error) {
	k.kmu.Lock()
	defer k.kmu.Unlock()
	var ids []uint32
	for _, key := range k.keys {
		ids = append(ids, key.ID)
	}
	return ids, k.server, nil
}

func keysBody(server string, keys ...netcode.ConnectKey) []byte {
	raw, err := json.Marshal(netcode.ConnectKeysPush{Keys: keys, Server: server})
	if err != nil {
		panic(err)
	}
	return raw
}

func secret(b byte, n int) []byte { return []byte(strings.Repeat(string([]byte{b}), n)) }

// TestConnectKeys: PUT /v1/connect-keys installs a fleet's keys and the address tokens name, with
// the bearer token; a key set that is not one (no keys, three, a key of another length, two of
// one id, an all-zero key) or an address that is not one is refused whole with 422 naming the
// field; GET answers the key ids and never a secret.
func TestConnectKeys(t *testing.T) {
	rt := &keysRuntime{}
	s, err := New(rt, Options{Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	url := hs.URL + netcode.PathConnectKeys

	code, body, _ := do(t, http.MethodGet, url, "", nil)
	if code != http.StatusOK || !strings.Contains(string(body), `"keyIds":[]`) {
		t.Fatalf("GET before any push: %d %s", code, body)
	}
	k1 := netcode.ConnectKey{ID: 1, Secret: secret(1, connecttoken.KeyBytes)}
	k2 := netcode.ConnectKey{ID: 2, Secret: secret(2, connecttoken.KeyBytes)}
	good := keysBody("10.1.2.3:7777", k2, k1)
	if code, body, _ := do(t, http.MethodPut, url, "", good); code != http.StatusUnauthorized || rt.sets != 0 {
		t.Fatalf("PUT without the bearer token: %d %s", code, body)
	}
	code, body, _ = do(t, http.MethodPut, url, testToken, good)
	var st netcode.ConnectKeysStatus
	if err := json.Unmarshal(body, &st); code != http.StatusOK || err != nil || fmt.Sprint(st.KeyIDs) != "[2 1]" || st.Server != "10.1.2.3:7777" {
		t.Fatalf("PUT: %d %s", code, body)
	}
	if rt.keys[0].Secret != [connecttoken.KeyBytes]byte(k2.Secret) {
		t.Fatal("the signing key's secret did not arrive")
	}

	for _, tc := range []struct {
		name, field string
		body        []byte
	}{
		{"no keys", "keys", keysBody("10.1.2.3:7777")},
		{"three keys", "keys", keysBody("10.1.2.3:7777", k1, k2, netcode.ConnectKey{ID: 3, Secret: secret(3, connecttoken.KeyBytes)})},
		{"a short key", "keys[1].secret", keysBody("10.1.2.3:7777", k1, netcode.ConnectKey{ID: 2, Secret: secret(2, 16)})},
		{"two keys of one id", "keys", keysBody("10.1.2.3:7777", k1, netcode.ConnectKey{ID: 1, Secret: secret(9, connecttoken.KeyBytes)})},
		{"an all-zero key", "keys", keysBody("10.1.2.3:7777", netcode.ConnectKey{ID: 4, Secret: secret(0, connecttoken.KeyBytes)})},
		{"a host name", "server", keysBody("gs.example.com:7777", k1)},
		{"no port", "server", keysBody("10.1.2.3", k1)},
		{"port 0", "server", keysBody("10.1.2.3:0", k1)},
	} {
		code, body, _ := do(t, http.MethodPut, url, testToken, tc.body)
		var e netcode.ErrorResponse
		_ = json.Unmarshal(body, &e)
		if code != http.StatusUnprocessableEntity || e.Field != tc.field {
			t.Errorf("%s: %d %s, want 422 naming %s", tc.name, code, body, tc.field)
		}
	}
	if code, _, _ := do(t, http.MethodPut, url, testToken, []byte(`{"keys":[],"sever":"x"}`)); code != http.StatusBadRequest {
		t.Errorf("an unknown field: %d", code)
	}
	if rt.sets != 1 {
		t.Errorf("%d installs, want the one valid push", rt.sets)
	}
	code, body, _ = do(t, http.MethodGet, url, "", nil)
	if code != http.StatusOK || strings.Contains(string(body), "secret") ||
		strings.Contains(string(body), base64.StdEncoding.EncodeToString(k1.Secret)) {
		t.Errorf("GET: %d %s", code, body)
	}

	// A runtime that does not check tokens has no such path.
	_, plain := newTestServer(t, &fakeRuntime{}, Options{})
	if code, _, _ := do(t, http.MethodGet, plain.URL+netcode.PathConnectKeys, "", nil); code != http.StatusNotFound {
		t.Errorf("a runtime without tokens: %d", code)
	}
}
