package console_test

import (
	"net/http"
	"testing"

	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// refuseAudit makes every audit insert in e's database fail, as a full
// disk or a revoked grant would, until the returned func is called.
func refuseAudit(t *testing.T, e *env) func() {
	t.Helper()
	_, err := e.db.Pool.Exec(t.Context(), `
CREATE OR REPLACE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'audit refused by the test'; END $$;
CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION refuse_audit();`)
	require.NoError(t, err)
	return func() {
		_, err := e.db.Pool.Exec(t.Context(), `DROP TRIGGER refuse_audit ON audit_log`)
		require.NoError(t, err)
	}
}

func paused(t *testing.T, e *env, route string) bool {
	t.Helper()
	var a struct {
		Routes []struct {
			Route  string `json:"route"`
			Paused bool   `json:"paused"`
		} `json:"routes"`
	}
	status, body := e.call(t, ciBot, http.MethodGet, "/api/v1/routes", nil, &a)
	require.Equal(t, http.StatusOK, status, body)
	for _, r := range a.Routes {
		if r.Route == route {
			return r.Paused
		}
	}
	t.Fatalf("no route %s", route)
	return false
}

// TestNoAuditRowNoAction: pause, resume and bulk retry write their audit
// row in the action's transaction, so when the row cannot be written the
// action does not happen: the route stays as it was, and no claim is
// reopened nor job queued. The answer is a 500 that names nothing of the
// database.
func TestNoAuditRowNoAction(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for range 3 {
		failedClaim(t, e, testfactory.ClaimOpts{})
	}
	allow := refuseAudit(t, e)

	status, body := e.call(t, alice, http.MethodPost, "/api/v1/routes/ship/pause", nil, nil)
	require.Equal(t, http.StatusInternalServerError, status, body)
	require.NotContains(t, body, "audit refused")
	require.False(t, paused(t, e, "ship"), "not paused without its audit row")

	status, body = e.call(t, alice, http.MethodPost, "/api/v1/retry", map[string]any{"dry_run": false}, nil)
	require.Equal(t, http.StatusInternalServerError, status, body)
	n, err := e.store.CountClaims(t.Context(), claim.Search{Status: claim.Failed})
	require.NoError(t, err)
	require.Equal(t, 3, n, "no claim reopened without its audit row")
	// And no job queued.
	rivertest.RequireNotInserted(t.Context(), t, riverpgxv5.New(e.db.Pool), &claim.DeliveryArgs{}, nil)

	allow()
	status, body = e.call(t, alice, http.MethodPost, "/api/v1/routes/ship/pause", nil, nil)
	require.Equal(t, http.StatusOK, status, body)
	require.True(t, paused(t, e, "ship"))
	refuseAudit(t, e)
	status, body = e.call(t, alice, http.MethodPost, "/api/v1/routes/ship/resume", nil, nil)
	require.Equal(t, http.StatusInternalServerError, status, body)
	require.True(t, paused(t, e, "ship"), "still paused without the resume's audit row")

	var rows int
	require.NoError(t, e.db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM audit_log`).Scan(&rows))
	require.Equal(t, 1, rows, "only the pause that happened")
}
