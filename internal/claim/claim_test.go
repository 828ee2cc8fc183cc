package claim_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

type bundle struct {
	db    *dbtest.DB
	store *claim.Store
}

func setup(t *testing.T) bundle {
	t.Helper()
	db := dbtest.NewDB(t)
	return bundle{db: db, store: newStore(t, db.Pool)}
}

func newStore(t *testing.T, pool *pgxpool.Pool) *claim.Store {
	t.Helper()
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{TestOnly: true})
	require.NoError(t, err)
	return claim.NewStore(pool, client, func(string) int { return 7 })
}

func event(id string) claim.Event {
	return claim.Event{Provider: "stripe", ID: id, Type: "invoice.paid", ObjectID: "in_1",
		ContentType: "application/json", Payload: []byte(`{"id": "` + id + `"}`)}
}

func TestClaimWinsOnceThenDuplicate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)

	res, err := b.store.Claim(ctx, event("evt_1"), []string{"ship", "mail"}, true)
	require.NoError(t, err)
	require.Equal(t, claim.Claimed, res.Outcome)
	require.Equal(t, 2, res.Deliveries)

	res, err = b.store.Claim(ctx, event("evt_1"), []string{"ship", "mail"}, true)
	require.NoError(t, err)
	require.Equal(t, claim.Duplicate, res.Outcome)
	require.Equal(t, claim.Processing, res.Status)

	tx, err := b.db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // read-only
	jobs := rivertest.RequireManyInsertedTx[*riverpgxv5.Driver](ctx, t, tx, []rivertest.ExpectedJob{
		{Args: &claim.DeliveryArgs{}, Opts: &rivertest.RequireInsertedOpts{MaxAttempts: 7}},
		{Args: &claim.DeliveryArgs{}, Opts: &rivertest.RequireInsertedOpts{MaxAttempts: 7}},
	})
	require.Len(t, jobs, 2)
}
