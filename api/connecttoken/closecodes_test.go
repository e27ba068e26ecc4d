package connecttoken_test

import (
	"testing"

	"github.com/netfleet/netfleet/api/connecttoken"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

// TestCloseCodesAreTheProtocols: the refusals' close codes are the wire protocol's.
func TestCloseCodesAreTheProtocols(t *testing.T) {
	for r, want := range map[connecttoken.Reason]uint32{
		connecttoken.Missing:         protocol.CloseTokenMissing,
		connecttoken.Malformed:       protocol.CloseTokenInvalid,
		connecttoken.Forged:          protocol.CloseTokenInvalid,
		connecttoken.Expired:         protocol.CloseTokenExpired,
		connecttoken.WrongServer:     protocol.CloseTokenWrongServer,
		connecttoken.WrongAllocation: protocol.CloseTokenWrongAllocation,
		connecttoken.Replayed:        protocol.CloseTokenReplayed,
		connecttoken.Full:            protocol.CloseStalled,
	} {
		if got := r.CloseCode(); got != want {
			t.Errorf("%v: close code %d, want the protocol's %d", r, got, want)
		}
	}
}
