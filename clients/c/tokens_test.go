package cclient

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/netfleet/netfleet/api/connecttoken"
	"github.com/netfleet/netfleet/api/netcode"
)

const testAdminToken = "c-client-test-admin-token"

// adminPut sends body to the arena server's admin API and fails the test unless it answers 200.
func adminPut(t *testing.T, srv server, path string, body any) {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPut, srv.admin+path, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT %s: %d", path, resp.StatusCode)
	}
}

// TestCClientTokenRefusals: against a server that requires connect tokens, a C client without a
// token, one with a forged token and one with an expired token are refused with 4005, 4006 and
// 4007, and see each code with its name and the server's CLOSE reason; the token travels in the
// C client's HELLO.
func TestCClientTokenRefusals(t *testing.T) {
	srv := startArenaEnv(t, func(k string) (string, bool) {
		if k == netcode.EnvAdminToken {
			return testAdminToken, true
		}
		return "", false
	})
	key := connecttoken.Key{ID: 1, Secret: [connecttoken.KeyBytes]byte{0x42, 0x43}}
	adminPut(t, srv, netcode.PathConnectKeys, netcode.ConnectKeysPush{
		Keys: []netcode.ConnectKey{{ID: key.ID, Secret: key.Secret[:]}}, Server: srv.game.String()})
	adminPut(t, srv, netcode.PathNetcode, netcode.ConfigPush{Generation: 1,
		Config: netcode.NetcodeConfig{ConnectTokens: netcode.ConnectTokensConfig{Mode: netcode.ConnectTokensRequired}}})

	issue := func(k connecttoken.Key, deadline time.Time) string {
		tok, err := connecttoken.Issue(nil, &k, &connecttoken.Claims{Server: srv.game, Allocation: "match", Player: "p1", Deadline: deadline})
		if err != nil {
			t.Fatal(err)
		}
		return hex.EncodeToString(tok)
	}
	forger := connecttoken.Key{ID: 1, Secret: [connecttoken.KeyBytes]byte{0x66}}
	schema := writeSchema(t)
	for _, tc := range []struct {
		name  string
		flags []string
		code  uint32
		label string
	}{
		{"no token", nil, connecttoken.CloseMissing, "token missing"},
		{"a forged token", []string{"--token", issue(forger, time.Now().Add(time.Minute))}, connecttoken.CloseInvalid, "token invalid"},
		{"an expired token", []string{"--token", issue(key, time.Now().Add(-time.Second))}, connecttoken.CloseExpired, "token expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bot := startCBot(t, srv.game, schema, 1, tc.flags...)
			ev := bot.next("closed")
			if ev.Code != tc.code || ev.Name != tc.label || ev.Reason == "" {
				t.Fatalf("closed with %d (%s), reason %q; want %d (%s) and a reason", ev.Code, ev.Name, ev.Reason, tc.code, tc.label)
			}
			t.Logf("closed: %d %s: %s; reason %q", ev.Code, ev.Name, ev.Meaning, ev.Reason)
		})
	}
}
