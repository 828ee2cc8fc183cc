package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hookgate/hookgate/internal/claim"
)

// ByProvider claims each event through the claimer of its provider's
// cell: one group (and one pool) per cell, so that a cell whose database is
// down fails only its own providers' requests.
type ByProvider map[string]Claimer

// Claim claims ev in its provider's cell.
func (b ByProvider) Claim(ctx context.Context, ev claim.Event, routes []string, reopen bool) (claim.Result, error) {
	c, ok := b[ev.Provider]
	if !ok {
		return claim.Result{}, fmt.Errorf("provider %s has no cell", ev.Provider)
	}
	return c.Claim(ctx, ev, routes, reopen)
}

// CellPinger is one cell's database as /readyz checks it.
type CellPinger struct {
	Name string
	DB   Pinger
}

// cellState is one cell in /readyz's answer.
type cellState struct {
	Name      string `json:"name"`
	Reachable bool   `json:"reachable"`
}

// readyBody is /readyz's answer when the configuration lists cells.
type readyBody struct {
	Status string      `json:"status"`
	Cells  []cellState `json:"cells"`
}

// WithCells makes /readyz check each of cells, at once, and name them in
// its answer with whether each is reachable (its database answers and
// accepts writes). It answers 200 while at least one is, since ingest then
// still accepts that cell's providers' events, and 503 when none is.
func (s *Server) WithCells(cells []CellPinger) *Server {
	s.cells = cells
	return s
}

// readyzCells is handleReadyz over several cells.
func (s *Server) readyzCells(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	states := make([]cellState, len(s.cells))
	var wg sync.WaitGroup
	for i, cell := range s.cells {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := cell.DB.Ping(ctx)
			states[i] = cellState{Name: cell.Name, Reachable: err == nil}
			if err != nil {
				s.logger.Warn("readiness check failed", slog.String("cell", cell.Name), slog.String("error", err.Error()))
			}
		}()
	}
	wg.Wait()
	for _, st := range states {
		if st.Reachable {
			return c.JSON(http.StatusOK, readyBody{Status: "ready", Cells: states})
		}
	}
	return c.JSON(http.StatusServiceUnavailable, readyBody{Status: "unavailable", Cells: states})
}
