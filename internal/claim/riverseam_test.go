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
	"github.com/riverqueue/river/rivertype"
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
		"re-check its statements against River's river_job and river_queue schemas and its JobCompleteTx, and riverclient.go's calls, then update riverChecked",
		v, riverChecked)
}

// TestRiverCompletionConformance ends running jobs with the seam's
// statements (JobLockRunningMany, JobDeleteRunningMany) and requires the
// outcome River's own calls reach, through River's public API:
//
//   - a job running the attempt that ended ends with no row, as one
//     River completes (river.JobCompleteTx) and its job cleaner later
//     deletes (Client.JobDeleteTx, the same end state);
//   - River's completion after Work returns (JobCompleteTx sends the
//     statement River's completer sends, JobSetStateIfRunningMany) then
//     finds no row, and leaves none: ErrNotFound, nothing written back;
//   - a job River rescued and started again under a later attempt is left
//     running, its columns untouched (River's own completion has no such
//     fence: it would complete it).
//
// Deleting is the only end hookgate writes to a job (a delivery failed for
// good ends its job too; retries, cancels and snoozes are River's own).
func TestRiverCompletionConformance(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	tx := dbtest.Tx(t)
	client, err := river.NewClient(riverpgxv5.New(nil), &river.Config{TestOnly: true})
	require.NoError(t, err)
	wctx := rivertest.WorkContext(ctx, client)

	args := DeliveryArgs{Provider: "stripe", EventID: "evt_conform", Route: "ship"}
	opts := &river.InsertOpts{Queue: Queue("ship"), MaxAttempts: 5, Metadata: []byte(`{"traceparent": "00-1-2-01"}`)}
	var ids [3]int64
	for i := range ids {
		res, err := client.InsertTx(ctx, tx, args, opts)
		require.NoError(t, err)
		ids[i] = res.Job.ID
	}
	// As River's producer fetches them: running their first attempt; the
	// third was rescued meanwhile and runs its second.
	_, err = tx.Exec(ctx, `UPDATE river_job SET state = 'running', attempt = CASE WHEN id = $2 THEN 2 ELSE 1 END,
    attempted_at = now(), attempted_by = ARRAY['conformance'] WHERE id = ANY($1)`, ids[:], ids[2])
	require.NoError(t, err)
	job := func(id int64) *river.Job[DeliveryArgs] {
		row, err := client.JobGetTx(ctx, tx, id)
		require.NoError(t, err)
		return &river.Job[DeliveryArgs]{JobRow: row, Args: args}
	}
	rescued, stale := jobColumns(t, tx, ids[2]), job(ids[1])

	// River's way: completed, then deleted once the retention is over.
	_, err = river.JobCompleteTx[*riverpgxv5.Driver](wctx, tx, job(ids[0]))
	require.NoError(t, err)
	_, err = client.JobDeleteTx(ctx, tx, ids[0])
	require.NoError(t, err)

	seam := riverTables{db: tx}
	runs := []JobRun{{ID: ids[1], Attempt: 1}, {ID: ids[2], Attempt: 1}}
	var b pgx.Batch
	seam.JobLockRunningMany(&b, runs)
	live := seam.JobDeleteRunningMany(&b, runs)
	require.NoError(t, tx.SendBatch(ctx, &b).Close())
	require.Equal(t, []bool{true, false}, live, "the run that ended is deleted; the rescued run's job is not")

	for _, id := range ids[:2] {
		_, err := client.JobGetTx(ctx, tx, id)
		require.ErrorIs(t, err, rivertype.ErrNotFound, "job %d has no row, River's way and the seam's", id)
	}
	_, err = river.JobCompleteTx[*riverpgxv5.Driver](wctx, tx, stale)
	require.ErrorIs(t, err, rivertype.ErrNotFound, "River's completion after Work finds no row")
	_, err = client.JobGetTx(ctx, tx, ids[1])
	require.ErrorIs(t, err, rivertype.ErrNotFound, "and writes none back")
	require.Equal(t, rescued, jobColumns(t, tx, ids[2]), "the rescued run's job is untouched")
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
	_, err = s.ClaimMany(ctx, []Request{{Event: ev, Routes: []string{"ship", "mail", "ledger"}}})
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
