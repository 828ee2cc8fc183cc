package testfactory

import (
	"context"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/claim"
)

// OpenBreaker opens route's circuit through store as the worker's breaker
// does after failures (audited as it is), its probe an hour away.
func OpenBreaker(ctx context.Context, tb testing.TB, store *claim.Store, route string) {
	tb.Helper()
	set := claim.BreakerSettings{Failures: 1, CoolDown: time.Hour, MaxCoolDown: time.Hour}
	ch, err := store.BreakerApply(ctx, route, claim.BreakerFailed, set, nil)
	if err != nil {
		tb.Fatalf("testfactory: opening the circuit of %s: %v", route, err)
	}
	if ch.State != claim.BreakerOpen {
		tb.Fatalf("testfactory: the circuit of %s is %s, not open", route, ch.State)
	}
}
