package console

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgconn"

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

// unreachable names cell in err when err is a failure to connect to it,
// with several cells (503, not 500); with one, err is as it always was.
func (a *cellActions) unreachable(cell string, err error) error {
	var ce *pgconn.ConnectError
	if len(a.cells) > 1 && errors.As(err, &ce) {
		return &cellDownError{cell: cell, err: err}
	}
	return err
}

func (a *cellActions) Retry(ctx context.Context, provider, eventID string, force bool) (operator.RetryResult, error) {
	cell := a.cfg.ProviderCell(provider)
	res, err := a.of(cell).Retry(ctx, provider, eventID, force)
	return res, a.unreachable(cell, err)
}

func (a *cellActions) BulkRetry(ctx context.Context, f claim.Search, force, dryRun bool, c *operator.Confirmed, reopened func(claim.EventKey, int)) (operator.BulkResult, error) {
	return operator.BulkRetryCells(ctx, a.cells, f, force, dryRun, c, reopened)
}

func (a *cellActions) PauseRoute(ctx context.Context, name string) error {
	cell := a.cfg.RouteCell(name)
	return a.unreachable(cell, a.of(cell).PauseRoute(ctx, name))
}

func (a *cellActions) ResumeRoute(ctx context.Context, name string) (bool, error) {
	cell := a.cfg.RouteCell(name)
	was, err := a.of(cell).ResumeRoute(ctx, name)
	return was, a.unreachable(cell, err)
}

func (a *cellActions) CloseBreaker(ctx context.Context, name string) (bool, int, error) {
	cell := a.cfg.RouteCell(name)
	was, released, err := a.of(cell).CloseBreaker(ctx, name)
	return was, released, a.unreachable(cell, err)
}
