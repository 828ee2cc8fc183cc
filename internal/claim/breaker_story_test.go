package claim_test

import (
	"context"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// TestBreakerNextOpenedAt shows that a circuit keeps the time it opened
// while it probes and opens again, and forgets it once closed.
func TestBreakerNextOpenedAt(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	set := claim.BreakerSettings{Failures: 1, CoolDown: time.Second, MaxCoolDown: time.Minute}
	b, action := claim.Breaker{State: claim.BreakerClosed}.Next(claim.BreakerFailed, t0, set, t0)
	require.Equal(t, claim.ActionBreakerOpen, action)
	require.Equal(t, t0, *b.OpenedAt)

	b.State = claim.BreakerHalfOpen // granted a probe
	t1 := t0.Add(time.Minute)
	b, action = b.Next(claim.BreakerProbeFailed, t1, set, t1)
	require.Equal(t, claim.ActionBreakerOpen, action)
	require.Equal(t, t0, *b.OpenedAt, "a failed probe opens it again: still opened at the first time")
	require.Equal(t, t1, *b.Since)
	require.Equal(t, 2, b.Failures)

	b, _ = b.Next(claim.BreakerClosedByHand, t1, set, t1)
	require.Nil(t, b.OpenedAt)
}

// TestBreakerStoryInPostgres shows what the breaker's row tells of an open
// circuit: when it opened, after how many failures, and the class of the
// last one; and that closing it reports the held jobs it released.
func TestBreakerStoryInPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.NewDB(t)
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{TestOnly: true})
	require.NoError(t, err)
	store := claim.NewStore(db.Pool, client, func(string) int { return 5 })
	set := claim.BreakerSettings{Failures: 2, CoolDown: time.Hour, MaxCoolDown: time.Hour}

	_, err = store.BreakerAnswer(ctx, "r", claim.BreakerFailed, time.Now(), "timeout", set)
	require.NoError(t, err)
	bs, err := store.Breakers(ctx, []string{"r"})
	require.NoError(t, err)
	require.Nil(t, bs["r"].OpenedAt)
	require.Equal(t, "timeout", *bs["r"].Story().LastFailure, "a closed circuit counting failures tells its last")

	ch, err := store.BreakerAnswer(ctx, "r", claim.BreakerFailed, time.Now(), "HTTP 503 Service Unavailable", set)
	require.NoError(t, err)
	require.Equal(t, claim.ActionBreakerOpen, ch.Action)
	bs, err = store.Breakers(ctx, []string{"r"})
	require.NoError(t, err)
	b := bs["r"].Story()
	require.Equal(t, claim.BreakerOpen, b.State)
	require.Equal(t, 2, b.Failures)
	require.Equal(t, "HTTP 503 Service Unavailable", *b.LastFailure)
	require.NotNil(t, b.OpenedAt)
	require.WithinDuration(t, b.Now, *b.OpenedAt, time.Minute)

	// An answer sent before it opened changes nothing of the story.
	_, err = store.BreakerAnswer(ctx, "r", claim.BreakerFailed, time.Now(), "connection refused", set)
	require.NoError(t, err)
	bs, err = store.Breakers(ctx, []string{"r"})
	require.NoError(t, err)
	require.Equal(t, "HTTP 503 Service Unavailable", *bs["r"].LastFailure)

	_, err = testfactory.ClaimEvent(ctx, store, claim.Event{Provider: "p", ID: "evt_held", Type: "t", Payload: []byte("{}")}, []string{"r"}, false)
	require.NoError(t, err)
	ids := testfactory.SetJobs(ctx, t, db.Pool, testfactory.JobWhere{}, &testfactory.JobOpts{State: "scheduled", ScheduledAt: testfactory.In(time.Hour)})
	require.Len(t, ids, 1)
	ch, err = store.BreakerApply(claim.WithActor(ctx, "alice"), "r", claim.BreakerClosedByHand, set, nil)
	require.NoError(t, err)
	require.Equal(t, 1, ch.Released)
	bs, err = store.Breakers(ctx, []string{"r"})
	require.NoError(t, err)
	require.Nil(t, bs["r"].OpenedAt)
	require.Nil(t, bs["r"].Story().LastFailure, "a closed circuit with nothing counted has no story")
}
