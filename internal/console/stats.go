package console

import (
	"cmp"
	"context"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Stats window bounds.
const (
	defaultStatsWindow = 24 * time.Hour
	maxStatsWindow     = 31 * 24 * time.Hour
)

// providerStats is one provider's claims first seen within the window.
type providerStats struct {
	Provider string         `json:"provider"`
	Claims   map[string]int `json:"claims"`
	// FailureRate is failed / (completed + failed); 0 when none settled.
	FailureRate float64 `json:"failure_rate"`
	// OldestProcessingSeconds is the age of the provider's oldest claim
	// still processing (whenever first seen); 0 when none.
	OldestProcessingSeconds float64 `json:"oldest_processing_seconds"`
}

// routeStats is one route's deliveries made within the window: those of
// the claims first seen within it, as a claim's deliveries are made with
// it.
type routeStats struct {
	Route                   string         `json:"route"`
	Deliveries              map[string]int `json:"deliveries"`
	FailureRate             float64        `json:"failure_rate"`
	OldestProcessingSeconds float64        `json:"oldest_processing_seconds"`
}

type stats struct {
	Window    string          `json:"window"`
	Providers []providerStats `json:"providers"`
	Routes    []routeStats    `json:"routes"`
	// UnavailableCells names the cells that could not be read; absent
	// when every cell answered.
	UnavailableCells []string `json:"unavailable_cells,omitempty"`
}

func rate(failed, completed int) float64 {
	if failed+completed == 0 {
		return 0
	}
	return math.Round(float64(failed)/float64(failed+completed)*1e4) / 1e4
}

// readStats counts the claims first seen within window, by provider, and
// the deliveries made within it, by route, and the oldest processing ages
// (claim.Store's Stats), then rates and orders them for the API: every
// configured provider and route appears, even with nothing to count.
func (s *Server) readStats(ctx context.Context, window time.Duration) (stats, error) {
	st := stats{Window: window.String(), Providers: []providerStats{}, Routes: []routeStats{}}
	providers := map[string]*providerStats{}
	provider := func(name string) *providerStats {
		if p, ok := providers[name]; ok {
			return p
		}
		p := &providerStats{Provider: name, Claims: map[string]int{}}
		providers[name] = p
		return p
	}
	routes := map[string]*routeStats{}
	route := func(name string) *routeStats {
		if r, ok := routes[name]; ok {
			return r
		}
		r := &routeStats{Route: name, Deliveries: map[string]int{}}
		routes[name] = r
		return r
	}
	for _, p := range s.cfg.Providers {
		provider(p.Name)
	}
	for _, r := range s.cfg.Routes {
		route(r.Name)
	}
	counts, err := s.store.Stats(ctx, window)
	if err != nil {
		return st, err
	}
	for name, byStatus := range counts.Claims {
		for status, n := range byStatus {
			provider(name).Claims[string(status)] = n
		}
	}
	for name, byStatus := range counts.Deliveries {
		for status, n := range byStatus {
			route(name).Deliveries[string(status)] = n
		}
	}
	for name, age := range counts.OldestClaimSeconds {
		provider(name).OldestProcessingSeconds = math.Round(age*1e3) / 1e3
	}
	for name, age := range counts.OldestDeliverySeconds {
		route(name).OldestProcessingSeconds = math.Round(age*1e3) / 1e3
	}
	for _, p := range providers {
		p.FailureRate = rate(p.Claims["failed"], p.Claims["completed"])
		st.Providers = append(st.Providers, *p)
	}
	for _, r := range routes {
		r.FailureRate = rate(r.Deliveries["failed"], r.Deliveries["completed"])
		st.Routes = append(st.Routes, *r)
	}
	// Failing first, then by name.
	slices.SortFunc(st.Providers, func(a, b providerStats) int {
		if c := cmp.Compare(b.FailureRate, a.FailureRate); c != 0 {
			return c
		}
		return strings.Compare(a.Provider, b.Provider)
	})
	slices.SortFunc(st.Routes, func(a, b routeStats) int {
		if c := cmp.Compare(b.FailureRate, a.FailureRate); c != 0 {
			return c
		}
		return strings.Compare(a.Route, b.Route)
	})
	return st, nil
}

func (s *Server) handleStats(w http.ResponseWriter, r *http.Request, _ principal) {
	window := defaultStatsWindow
	for k := range r.URL.Query() {
		if k != "window" {
			s.fail(w, r, bad("unknown parameter %q: want window", cut(k, 64)))
			return
		}
	}
	if v := r.URL.Query().Get("window"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Minute || d > maxStatsWindow {
			s.fail(w, r, bad("window: want a duration from 1m to 744h, such as 24h"))
			return
		}
		window = d
	}
	st, err := s.readStats(r.Context(), window)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	st.UnavailableCells = s.unavailable(r)
	writeJSON(w, http.StatusOK, st)
}
