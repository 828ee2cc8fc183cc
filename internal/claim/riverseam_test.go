package claim

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/dbtest"
)

// TestRiverVersionChecked fails when go.mod moves River to a release the
// seam (riverseam.go) was not checked against. The version is the one
// debug.ReadBuildInfo reports in a program built with River; a test
// binary's build information lists no dependencies, so it asks a small one
// (testdata/riverversion).
func TestRiverVersionChecked(t *testing.T) {
	t.Parallel()
	args := append(append([]string{"run"}, buildFlags...), "./testdata/riverversion")
	out, err := exec.CommandContext(t.Context(), "go", args...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	v := strings.TrimSpace(string(out))
	require.Equalf(t, riverChecked, v, "River is %s, but internal/claim/riverseam.go was checked against %s: "+
		"re-check its statements against River's river_job and river_queue schemas and its JobCompleteTx, then update riverChecked",
		v, riverChecked)
}

// timestamps are the columns the conformance test leaves aside: set from
// clocks, never equal between two rows.
var timestamps = []string{"created_at", "attempted_at", "finalized_at", "scheduled_at"}

// TestRiverCompletionConformance ends two identical running jobs, one with
// river.JobCompleteTx and one with the seam's statements, and requires the
// two rows to be equal column by column, timestamps aside (those must be
// set, or not, alike). It covers every state hookgate writes to a job:
// completed is the only one (a delivery failed for good completes its job
// too; retries, cancels and snoozes are River's own).
func TestRiverCompletionConformance(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	tx := dbtest.Tx(t)
	client, err := river.NewClient(riverpgxv5.New(nil), &river.Config{TestOnly: true})
	require.NoError(t, err)

	for _, state := range []string{"completed"} {
		t.Run(state, func(t *testing.T) {
			args := DeliveryArgs{Provider: "stripe", EventID: "evt_conform_" + state, Route: "ship"}
			opts := &river.InsertOpts{Queue: Queue("ship"), MaxAttempts: 5, Metadata: []byte(`{"traceparent": "00-1-2-01"}`)}
			var ids [2]int64
			for i := range ids {
				res, err := client.InsertTx(ctx, tx, args, opts)
				require.NoError(t, err)
				ids[i] = res.Job.ID
			}
			// As River's producer fetches them: running their first attempt.
			_, err := tx.Exec(ctx, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now(),
    attempted_by = ARRAY['conformance'] WHERE id = ANY($1)`, ids[:])
			require.NoError(t, err)

			row, err := client.JobGetTx(ctx, tx, ids[0])
			require.NoError(t, err)
			_, err = river.JobCompleteTx[*riverpgxv5.Driver](rivertest.WorkContext(ctx, client), tx, &river.Job[DeliveryArgs]{JobRow: row, Args: args})
			require.NoError(t, err)

			seam := riverTables{db: tx}
			runs := []JobRun{{ID: ids[1], Attempt: 1}}
			var b pgx.Batch
			seam.JobLockRunningMany(&b, runs)
			live := seam.JobCompleteRunningMany(&b, runs, time.Now())
			require.NoError(t, tx.SendBatch(ctx, &b).Close())
			require.Equal(t, []bool{true}, live)

			theirs, ours := jobColumns(t, tx, ids[0]), jobColumns(t, tx, ids[1])
			require.Equal(t, state, theirs["state"])
			for _, c := range timestamps {
				require.Equalf(t, theirs[c] == nil, ours[c] == nil, "%s is set by one completion and not the other", c)
				delete(theirs, c)
				delete(ours, c)
			}
			delete(theirs, "id")
			delete(ours, "id")
			require.Equal(t, theirs, ours, "River's completion and the seam's differ")
		})
	}
}

// jobColumns returns job id's row, column by column.
func jobColumns(t *testing.T, tx pgx.Tx, id int64) map[string]any {
	t.Helper()
	var raw []byte
	require.NoError(t, tx.QueryRow(t.Context(), `SELECT to_jsonb(j) FROM river_job j WHERE id = $1`, id).Scan(&raw))
	var cols map[string]any
	require.NoError(t, json.Unmarshal(raw, &cols))
	return cols
}

// TestStrandedNeedsEveryPredecessorCompleted pins the reconciler's
// stranded-delivery query: a waiting delivery behind a failed predecessor
// is not stranded, however stale, even when its other predecessor
// completed; once every predecessor completed, it is.
func TestStrandedNeedsEveryPredecessorCompleted(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	tx := dbtest.Tx(t)
	client, err := river.NewClient(riverpgxv5.New(nil), &river.Config{TestOnly: true})
	require.NoError(t, err)
	s := NewStore(tx, client, func(string) int { return 5 })
	ev := Event{Provider: "stripe", ID: "evt_stranded_fan", Type: "invoice.paid", ObjectID: "in_1",
		ContentType: "application/json", Payload: []byte(`{}`), After: map[string][]string{"ledger": {"ship", "mail"}}}
	_, err = s.Claim(ctx, ev, []string{"ship", "mail", "ledger"}, true)
	require.NoError(t, err)
	set := func(route, status string) {
		t.Helper()
		_, err := tx.Exec(ctx, `UPDATE webhook_deliveries SET status = $2, updated_at = now() - interval '1 hour',
    completed_at = CASE WHEN $2 = 'completed' THEN now() END
WHERE provider = 'stripe' AND event_id = 'evt_stranded_fan' AND route = $1`, route, status)
		require.NoError(t, err)
	}
	set("ship", "failed")
	set("mail", "completed")
	set("ledger", "waiting")
	keys, err := s.river().DeliveryListStranded(ctx, 10*time.Minute, 100)
	require.NoError(t, err)
	require.Empty(t, keys, "a failed predecessor is not a completed one")

	set("ship", "completed")
	keys, err = s.river().DeliveryListStranded(ctx, 10*time.Minute, 100)
	require.NoError(t, err)
	require.Equal(t, []Key{{Provider: "stripe", EventID: "evt_stranded_fan", Route: "ledger"}}, keys)
}
