package api

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/astrabox/astrabox/store"
)

// TestAdministratorReadsASessionsDiagnostics: what the Relay kept of a program's
// untranslated output is readable by an administrator, oldest first; the Session's
// owner and other members are refused.
func TestAdministratorReadsASessionsDiagnostics(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	lease, err := f.st.AcquireReaderLease(f.ctx, store.LeaseRequest{SessionID: id, Holder: "relay-" + id, TTL: time.Minute})
	require.NoError(t, err)
	_, err = f.st.ApplyRelayBatch(f.ctx, store.RelayBatch{SessionID: id, LeaseGeneration: lease.Generation, Ops: []store.RelayOp{
		{Diagnostic: &store.DiagnosticRecord{EventType: "unparsed_line", Raw: json.RawMessage(`"Warning: low disk"`), Keep: 10}},
		{Diagnostic: &store.DiagnosticRecord{EventType: "control_response", Raw: json.RawMessage(`{"subtype":"success"}`), Keep: 10}},
	}})
	require.NoError(t, err)

	path := "/api/v1/admin/sessions/" + id + "/diagnostics"
	f.call("GET", path, f.member, nil).refused(t, http.StatusForbidden, CodeForbidden)
	f.call("GET", path, f.other, nil).refused(t, http.StatusForbidden, CodeForbidden)
	var got []diagnosticView
	f.call("GET", path, f.admin, nil).ok(t).into(t, &got)
	require.Len(t, got, 2)
	require.Equal(t, "unparsed_line", got[0].EventType)
	require.JSONEq(t, `"Warning: low disk"`, string(got[0].Raw))
	require.Equal(t, "control_response", got[1].EventType)
	require.Less(t, got[0].Seq, got[1].Seq)
	f.call("GET", "/api/v1/admin/sessions/00000000-0000-4000-8000-000000000000/diagnostics", f.admin, nil).refused(t, http.StatusNotFound, CodeNotFound)
}

// TestRuntimeInfoIsOnTheAdministratorsSessionView: the runtime-info snapshot the last
// activation saved is shown to an administrator and left out for the owner.
func TestRuntimeInfoIsOnTheAdministratorsSessionView(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.newSession(f.member)
	f.exec(`UPDATE sessions SET runtime_info = '{"sandbox_id":"box-1","runner_build":"abc123","adapter_version":"astrabox x (engine contract v7)"}' WHERE id = $1`, id)

	var admin map[string]json.RawMessage
	f.call("GET", "/api/v1/sessions/"+id, f.admin, nil).ok(t).into(t, &admin)
	require.JSONEq(t, `{"sandbox_id":"box-1","runner_build":"abc123","adapter_version":"astrabox x (engine contract v7)"}`, string(admin["runtime_info"]))
	var owner map[string]json.RawMessage
	f.call("GET", "/api/v1/sessions/"+id, f.member, nil).ok(t).into(t, &owner)
	require.NotContains(t, owner, "runtime_info")
}
