package console

import (
	"context"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/operator"
)

// cellActions takes each action in its cell, where it is audited: a
// claim's in its provider's cell, a route's in its provider's, a bulk
// retry in every cell (operator.BulkRetryCells).
type cellActions struct {
	cfg   *config.Config
	cells []operator.Cell
	// Routes are the configured route names.
	Routes []string
}

// of returns the actions of cell name; the first cell's when this worker
// does not serve it.
func (a *cellActions) of(name string) *operator.Actions {
	for _, c := range a.cells {
		if c.Name == name {
			return c.Actions
		}
	}
	return a.cells[0].Actions
}

func (a *cellActions) Retry(ctx context.Context, provider, eventID string, force bool) (operator.RetryResult, error) {
	return a.of(a.cfg.ProviderCell(provider)).Retry(ctx, provider, eventID, force)
}

func (a *cellActions) BulkRetry(ctx context.Context, f claim.Search, force, dryRun bool, c *operator.Confirmed, reopened func(claim.EventKey, int)) (operator.BulkResult, error) {
	return operator.BulkRetryCells(ctx, a.cells, f, force, dryRun, c, reopened)
}

func (a *cellActions) PauseRoute(ctx context.Context, name string) error {
	return a.of(a.cfg.RouteCell(name)).PauseRoute(ctx, name)
}

func (a *cellActions) ResumeRoute(ctx context.Context, name string) (bool, error) {
	return a.of(a.cfg.RouteCell(name)).ResumeRoute(ctx, name)
}

func (a *cellActions) CloseBreaker(ctx context.Context, name string) (bool, error) {
	return a.of(a.cfg.RouteCell(name)).CloseBreaker(ctx, name)
}
