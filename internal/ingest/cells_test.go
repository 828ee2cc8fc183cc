package ingest_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/ingest"
)

type pingFunc func(context.Context) error

func (f pingFunc) Ping(ctx context.Context) error { return f(ctx) }

var (
	up   = pingFunc(func(context.Context) error { return nil })
	down = pingFunc(func(context.Context) error { return errors.New("connection refused") })
)

// TestReadyzCells: with cells, /readyz names each and whether it is
// reachable, and stays ready while one is.
func TestReadyzCells(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		name   string
		cells  []ingest.CellPinger
		status int
		body   map[string]any
	}{
		{"both up", []ingest.CellPinger{{Name: "eu", DB: up}, {Name: "us", DB: up}}, http.StatusOK, map[string]any{
			"status": "ready", "cells": []any{
				map[string]any{"name": "eu", "reachable": true}, map[string]any{"name": "us", "reachable": true}}}},
		{"one down", []ingest.CellPinger{{Name: "eu", DB: up}, {Name: "us", DB: down}}, http.StatusOK, map[string]any{
			"status": "ready", "cells": []any{
				map[string]any{"name": "eu", "reachable": true}, map[string]any{"name": "us", "reachable": false}}}},
		{"all down", []ingest.CellPinger{{Name: "eu", DB: down}, {Name: "us", DB: down}}, http.StatusServiceUnavailable, map[string]any{
			"status": "unavailable", "cells": []any{
				map[string]any{"name": "eu", "reachable": false}, map[string]any{"name": "us", "reachable": false}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b.srv.WithCells(tc.cells)
			status, body := b.serve(t, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			require.Equal(t, tc.status, status)
			require.Equal(t, tc.body, body)
		})
	}
	require.Contains(t, b.logs.String(), `"cell":"us"`, "the unreachable cell is logged by name")
}

type recordClaimer struct{ got *[]string }

func (r recordClaimer) Claim(_ context.Context, ev claim.Event, _ []string, _ bool) (claim.Result, error) {
	*r.got = append(*r.got, ev.ID)
	return claim.Result{}, nil
}

// TestByProvider: each event goes to its provider's claimer; a provider
// without one is an error, not a claim elsewhere.
func TestByProvider(t *testing.T) {
	t.Parallel()
	var eu, us []string
	b := ingest.ByProvider{"pay": recordClaimer{&eu}, "ship": recordClaimer{&us}}
	for _, ev := range []claim.Event{{Provider: "pay", ID: "1"}, {Provider: "ship", ID: "2"}, {Provider: "pay", ID: "3"}} {
		_, err := b.Claim(t.Context(), ev, nil, false)
		require.NoError(t, err)
	}
	require.Equal(t, []string{"1", "3"}, eu)
	require.Equal(t, []string{"2"}, us)
	_, err := b.Claim(t.Context(), claim.Event{Provider: "other", ID: "4"}, nil, false)
	require.EqualError(t, err, "provider other has no cell")
}
