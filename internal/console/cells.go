package console

// The console over several cells: a claimReader (and audit lister) that
// asks every cell at once and answers as one cell would, each claim found
// in its provider's cell. A cell whose read fails is named in the
// request's unavailable cells (unavailableOf) and left out, so that the
// others are shown; with one cell, the console reads it directly, as it
// always has.

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hookgate/hookgate/internal/cell"
	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/operator"
)

// Cell is one cell the console reads and acts on (Options.Cells).
type Cell struct {
	Name string
	// Store acts on the cell (and reads it when Reads is nil).
	Store *claim.Store
	// Reads is the cell's claim.ReadPool.
	Reads claim.DB
	// Queues pauses and resumes the cell's routes (its River client).
	Queues claim.Queues
}

// cellReader is one cell as the console reads it.
type cellReader struct {
	name   string
	reads  *claim.Store
	queues claim.Queues
}

// unavailableCells collects, for one request, the cells that could not be read.
type unavailableCells struct {
	mu    sync.Mutex
	names []string
}

type unavailableKey struct{}

// withUnavailable returns ctx collecting the cells its reads could not
// reach.
func withUnavailable(ctx context.Context) context.Context {
	return context.WithValue(ctx, unavailableKey{}, &unavailableCells{})
}

// unavailableOf returns the cells ctx's reads could not reach, in
// configuration order; nil when every cell answered.
func unavailableOf(ctx context.Context, order []string) []string {
	u, _ := ctx.Value(unavailableKey{}).(*unavailableCells)
	if u == nil {
		return nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []string
	for _, n := range order {
		if slices.Contains(u.names, n) {
			out = append(out, n)
		}
	}
	return out
}

func (u *unavailableCells) add(name string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !slices.Contains(u.names, name) {
		u.names = append(u.names, name)
	}
}

// cellsReader reads every cell as one.
type cellsReader struct {
	cfg    *config.Config
	cells  []cellReader
	logger *slog.Logger
}

// names are the cells' names, in configuration order.
func (m *cellsReader) names() []string {
	out := make([]string, len(m.cells))
	for i, c := range m.cells {
		out[i] = c.name
	}
	return out
}

// each runs read on every cell at once. A cell whose read fails is named
// in ctx's unavailable cells and logged, and each's error is nil; when ctx
// itself ended (a count's bound, a client gone), its error is returned, as
// is a request the cells refuse alike (a bad filter).
func (m *cellsReader) each(ctx context.Context, read func(i int, c *cellReader) error) error {
	errs := cell.Each(len(m.cells), func(i int) error { return read(i, &m.cells[i]) })
	if err := ctx.Err(); err != nil {
		return err
	}
	u, _ := ctx.Value(unavailableKey{}).(*unavailableCells)
	for i, err := range errs {
		if err == nil {
			continue
		}
		var iv *operator.InvalidError
		var br *badRequest
		if errors.As(err, &iv) || errors.As(err, &br) {
			return err
		}
		m.logger.Warn("console: cell unavailable", slog.String("cell", m.cells[i].name), slog.String("error", err.Error()))
		if u != nil {
			u.add(m.cells[i].name)
		}
	}
	return nil
}

// of returns the cell holding provider's claims (the first for a provider
// the configuration does not name, or one this worker does not serve).
func (m *cellsReader) of(provider string) *cellReader {
	want := m.cfg.ProviderCell(provider)
	for i := range m.cells {
		if m.cells[i].name == want {
			return &m.cells[i]
		}
	}
	return &m.cells[0]
}

// cellDownError is a read of one claim whose cell could not be read.
type cellDownError struct {
	cell string
	err  error
}

func (e *cellDownError) Error() string {
	return "cell " + e.cell + " cannot be read right now; try again"
}

func (e *cellDownError) Unwrap() error { return e.err }

// down names c in err, unless err is a claim not found or a read past the
// read pool's bounds (answered as with one cell).
func down(c *cellReader, err error) error {
	if err == nil || errors.Is(err, claim.ErrNotFound) || errors.Is(err, claim.ErrReadTimeout) {
		return err
	}
	return &cellDownError{cell: c.name, err: err}
}

func (m *cellsReader) Get(ctx context.Context, provider, eventID string) (claim.Record, []claim.Delivery, error) {
	c := m.of(provider)
	r, ds, err := c.reads.Get(ctx, provider, eventID)
	return r, ds, down(c, err)
}

// Holds reads what holds a claim's deliveries in its provider's cell,
// where its jobs and its routes' breakers and rates are.
func (m *cellsReader) Holds(ctx context.Context, provider, eventID string, paced func(route string) bool) (map[string]claim.Hold, error) {
	c := m.of(provider)
	hs, err := c.reads.Holds(ctx, provider, eventID, paced)
	return hs, down(c, err)
}

func (m *cellsReader) Attempts(ctx context.Context, provider, eventID string, full bool) (map[string][]claim.AttemptRecord, error) {
	c := m.of(provider)
	as, err := c.reads.Attempts(ctx, provider, eventID, full)
	return as, down(c, err)
}

func (m *cellsReader) Payload(ctx context.Context, provider, eventID string) ([]byte, string, error) {
	c := m.of(provider)
	body, enc, err := c.reads.Payload(ctx, provider, eventID)
	return body, enc, down(c, err)
}

// SearchClaims asks every cell for f's page and merges them.
func (m *cellsReader) SearchClaims(ctx context.Context, f claim.Search) ([]claim.Record, error) {
	pages := make([][]claim.Record, len(m.cells))
	err := m.each(ctx, func(i int, c *cellReader) (err error) {
		pages[i], err = c.reads.SearchClaims(ctx, f)
		return err
	})
	if err != nil {
		return nil, err
	}
	limit := f.Limit
	if limit <= 0 {
		limit = defaultLimit
	}
	merged, _ := cell.MergeClaims(pages, limit, f.After == nil && f.Newer != nil)
	return merged, nil
}

// CountClaimsUpTo adds up every cell's count, up to bound.
func (m *cellsReader) CountClaimsUpTo(ctx context.Context, f claim.Search, bound int) (int, error) {
	counts := make([]int, len(m.cells))
	err := m.each(ctx, func(i int, c *cellReader) (err error) {
		counts[i], err = c.reads.CountClaimsUpTo(ctx, f, bound)
		return err
	})
	total := 0
	for _, n := range counts {
		total += n
	}
	return min(total, bound), err
}

// CountFailedByRoute adds up each cell's counts by route (a route lives
// in one cell, so its count is that cell's), most first, as one cell
// orders them.
func (m *cellsReader) CountFailedByRoute(ctx context.Context, f claim.Search) ([]claim.RouteCount, error) {
	counts := make([][]claim.RouteCount, len(m.cells))
	err := m.each(ctx, func(i int, c *cellReader) (err error) {
		counts[i], err = c.reads.CountFailedByRoute(ctx, f)
		return err
	})
	byRoute := map[string]int{}
	for _, cs := range counts {
		for _, rc := range cs {
			byRoute[rc.Route] += rc.Claims
		}
	}
	out := make([]claim.RouteCount, 0, len(byRoute))
	for route, n := range byRoute {
		out = append(out, claim.RouteCount{Route: route, Claims: n})
	}
	slices.SortFunc(out, func(a, b claim.RouteCount) int {
		return cmp.Or(cmp.Compare(b.Claims, a.Claims), strings.Compare(a.Route, b.Route))
	})
	return out, err
}

// DeliveriesOf reads each claim's deliveries in its provider's cell.
func (m *cellsReader) DeliveriesOf(ctx context.Context, keys []claim.EventKey) (map[claim.EventKey][]claim.Delivery, error) {
	byCell := make([][]claim.EventKey, len(m.cells))
	for _, k := range keys {
		c := m.of(k.Provider)
		i := slices.IndexFunc(m.cells, func(x cellReader) bool { return x.name == c.name })
		byCell[i] = append(byCell[i], k)
	}
	found := make([]map[claim.EventKey][]claim.Delivery, len(m.cells))
	err := m.each(ctx, func(i int, c *cellReader) (err error) {
		if len(byCell[i]) > 0 {
			found[i], err = c.reads.DeliveriesOf(ctx, byCell[i])
		}
		return err
	})
	out := map[claim.EventKey][]claim.Delivery{}
	for _, ds := range found {
		for k, d := range ds {
			out[k] = d
		}
	}
	return out, err
}

// RouteStates reads each route's state in its cell, with the cell's
// queues; the routes of a cell that cannot be read are left out.
func (m *cellsReader) RouteStates(ctx context.Context, _ claim.Queues, routes []string) ([]claim.RouteState, error) {
	states := make([][]claim.RouteState, len(m.cells))
	err := m.each(ctx, func(i int, c *cellReader) (err error) {
		var mine []string
		for _, r := range routes {
			if m.cfg.RouteCell(r) == c.name {
				mine = append(mine, r)
			}
		}
		if len(mine) > 0 {
			states[i], err = c.reads.RouteStates(ctx, c.queues, mine)
		}
		return err
	})
	byRoute := map[string]claim.RouteState{}
	for _, ss := range states {
		for _, st := range ss {
			byRoute[st.Route] = st
		}
	}
	var out []claim.RouteState
	for _, r := range routes {
		if st, ok := byRoute[r]; ok {
			out = append(out, st)
		}
	}
	return out, err
}

// StatusCounts adds up every cell's counts.
func (m *cellsReader) StatusCounts(ctx context.Context, since time.Time) (map[claim.Status]int, error) {
	counts := make([]map[claim.Status]int, len(m.cells))
	err := m.each(ctx, func(i int, c *cellReader) (err error) {
		counts[i], err = c.reads.StatusCounts(ctx, since)
		return err
	})
	out := map[claim.Status]int{}
	for _, cs := range counts {
		for st, n := range cs {
			out[st] += n
		}
	}
	return out, err
}

// RouteActivity is every cell's activity (a route's is in its cell).
func (m *cellsReader) RouteActivity(ctx context.Context, since time.Time, step time.Duration, n int) ([]claim.Activity, error) {
	acts := make([][]claim.Activity, len(m.cells))
	err := m.each(ctx, func(i int, c *cellReader) (err error) {
		acts[i], err = c.reads.RouteActivity(ctx, since, step, n)
		return err
	})
	return slices.Concat(acts...), err
}

// Stats adds up every cell's counts; the oldest ages are the oldest of
// any cell.
func (m *cellsReader) Stats(ctx context.Context, window time.Duration) (claim.Stats, error) {
	all := make([]claim.Stats, len(m.cells))
	err := m.each(ctx, func(i int, c *cellReader) (err error) {
		all[i], err = c.reads.Stats(ctx, window)
		return err
	})
	out := claim.Stats{Claims: map[string]map[claim.Status]int{}, Deliveries: map[string]map[claim.DeliveryStatus]int{},
		OldestClaimSeconds: map[string]float64{}, OldestDeliverySeconds: map[string]float64{}}
	for _, st := range all {
		addCounts(out.Claims, st.Claims)
		addCounts(out.Deliveries, st.Deliveries)
		oldest(out.OldestClaimSeconds, st.OldestClaimSeconds)
		oldest(out.OldestDeliverySeconds, st.OldestDeliverySeconds)
	}
	return out, err
}

func addCounts[S comparable](dst, src map[string]map[S]int) {
	for name, byStatus := range src {
		if dst[name] == nil {
			dst[name] = map[S]int{}
		}
		for st, n := range byStatus {
			dst[name][st] += n
		}
	}
}

func oldest(dst, src map[string]float64) {
	for name, age := range src {
		dst[name] = max(dst[name], age)
	}
}

// AuditRows merges every cell's audit, newest first.
func (m *cellsReader) AuditRows(ctx context.Context, f claim.AuditFilter, limit int, pos *claim.AuditPosition) ([]claim.AuditRow, error) {
	pages := make([][]claim.AuditRow, len(m.cells))
	err := m.each(ctx, func(i int, c *cellReader) (err error) {
		pages[i], err = c.reads.AuditRows(ctx, f, limit, pos)
		return err
	})
	return cell.MergeAudit(pages, limit), err
}

// withCells adds to an answer the cells r's reads could not reach, as
// unavailable_cells; an answer where every cell answered is left as it is.
func (s *Server) withCells(r *http.Request, answer map[string]any) map[string]any {
	if names := s.unavailable(r); len(names) > 0 {
		answer["unavailable_cells"] = names
	}
	return answer
}
