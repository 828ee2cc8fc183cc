package cell_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/cell"
	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/testfactory"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const twoCells = `
cells:
  - {name: eu, database_url_env: DB_EU}
  - {name: us, database_url_env: DB_US}
providers:
  - {name: pay, scheme: stripe, secrets_env: [K]}
  - {name: ship, scheme: stripe, secrets_env: [K], cell: us}
routes:
  - {name: charge, provider: pay, url: "https://a.example/x", events: ["*"]}
  - {name: label, provider: ship, url: "https://b.example/x", events: ["*"]}
`

// TestSet: the set keeps the configuration's order, knows each provider's
// and route's cell, and each cell's store writes to that cell's database
// only.
func TestSet(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse([]byte(twoCells))
	require.NoError(t, err)
	eu, us := dbtest.NewDB(t), dbtest.NewDB(t)
	set, err := cell.New(cfg, []cell.Pool{{Name: "eu", Pool: eu.Pool}, {Name: "us", Pool: us.Pool}},
		func(p cell.Pool) (*river.Client[pgx.Tx], error) { return claim.NewInsertClient(p.Pool, nil, 0) }, cfg.MaxAttempts)
	require.NoError(t, err)

	var names []string
	for _, c := range set.All() {
		names = append(names, c.Name)
	}
	require.Equal(t, []string{"eu", "us"}, names)
	require.Equal(t, "eu", set.First().Name)
	for provider, want := range map[string]string{"pay": "eu", "ship": "us"} {
		c, ok := set.ForProvider(provider)
		require.True(t, ok)
		require.Equal(t, want, c.Name, provider)
	}
	c, ok := set.ForRoute("label")
	require.True(t, ok)
	require.Equal(t, "us", c.Name)
	require.Equal(t, []string{"label"}, set.Routes("us", []string{"charge", "label"}))

	ctx := context.Background()
	for _, ev := range []struct{ provider, route string }{{"pay", "charge"}, {"ship", "label"}} {
		c, _ := set.ForProvider(ev.provider)
		_, err := c.Store.Claim(ctx, claim.Event{Provider: ev.provider, ID: "evt_1", Type: "t", Payload: []byte(`{}`)}, []string{ev.route}, true)
		require.NoError(t, err)
	}
	for db, want := range map[*dbtest.DB]string{eu: "pay", us: "ship"} {
		var providers []string
		rows, err := db.Pool.Query(ctx, `SELECT provider FROM webhook_event_claims`)
		require.NoError(t, err)
		providers, err = pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.Equal(t, []string{want}, providers, db.Name)
		// One job, of this cell's provider: none of the other cell's.
		jobs := rivertest.RequireManyInserted(ctx, t, riverpgxv5.New(db.Pool), testfactory.DeliveryJobs(1, nil))
		var args claim.DeliveryArgs
		require.NoError(t, json.Unmarshal(jobs[0].EncodedArgs, &args))
		require.Equal(t, want, args.Provider, db.Name)
	}

	// A subset (worker --cells us) holds no cell for the other providers.
	sub, err := cell.New(cfg, []cell.Pool{{Name: "us", Pool: us.Pool}},
		func(p cell.Pool) (*river.Client[pgx.Tx], error) { return claim.NewInsertClient(p.Pool, nil, 0) }, cfg.MaxAttempts)
	require.NoError(t, err)
	_, ok = sub.ForProvider("pay")
	require.False(t, ok)
}
