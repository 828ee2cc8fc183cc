package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/form"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/gate"
	"github.com/hookgate/hookgate/internal/route"
	"github.com/hookgate/hookgate/internal/secretfile"
	"github.com/hookgate/hookgate/internal/verify"
)

// maxStripeTypes is how many types[] Stripe's event list takes.
const maxStripeTypes = 20

// stripeSource lists a Stripe account's events with stripe-go and claims
// each one no claim holds, as ingest would have claimed its webhook.
type stripeSource struct {
	provider config.Provider
	key      *secretfile.Secret
	backend  stripe.Backend
	table    *route.Table
	// types are the exact event types the provider's routes take, for
	// types[]; nil lists every type (a route takes a glob, or more than
	// Stripe's 20), and the route table's own matcher filters.
	types   []string
	maxBody int64
	logger  *slog.Logger
}

// newStripe opens the key of p's reconcile section.
func newStripe(key string, p config.Provider, o Options) (*stripeSource, error) {
	r := p.Reconcile
	secret, err := openSecret(o, key+".api_key_env", r.APIKeyEnv, key+".api_key_file", r.APIKeyFile)
	if err != nil {
		return nil, err
	}
	s := &stripeSource{provider: p, key: secret, table: o.Routes, maxBody: o.Config.Ingest.MaxBodyBytes, logger: o.Logger}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	s.types = stripeTypes(o.Config.Routes, p.Name)
	client := httpClient(nil) // stripe-go sets the key on each call
	base := strings.TrimSuffix(r.APIBase, "/")
	retries := int64(0) // 429s are waited out here, by their Retry-After
	s.backend = stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		HTTPClient: client, URL: &base, MaxNetworkRetries: &retries,
		LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull}, EnableTelemetry: new(bool),
	})
	return s, nil
}

// stripeTypes returns the exact event types the provider's routes take
// (none when it has no route), or nil when one takes a glob (or there are
// more than types[] holds): then every event is listed and the routes' own
// matcher filters.
func stripeTypes(routes []config.Route, provider string) []string {
	types := []string{} // none: no route takes any of its events
	seen := map[string]bool{}
	for _, r := range routes {
		if r.Provider != provider {
			continue
		}
		for _, e := range r.Events {
			if strings.ContainsAny(e, `*?[\`) {
				return nil
			}
			if !seen[e] {
				seen[e] = true
				types = append(types, e)
			}
		}
	}
	if len(types) > maxStripeTypes {
		return nil
	}
	return types
}

func (s *stripeSource) secret() string { return string(s.key.Value()) }

// eventPage is one page of GET /v1/events, each event's bytes kept as the
// API sent them: they are what the claim stores and routes are sent.
type eventPage struct {
	stripe.APIResource
	Object  string            `json:"object"`
	Data    []json.RawMessage `json:"data"`
	HasMore bool              `json:"has_more"`
}

// stripeEvent is what a run reads of an event before normalizing it.
type stripeEvent struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Created int64  `json:"created"`
}

// run implements source: it lists the events created since w.since,
// newest first, page by page (starting_after the last one of the page
// before) while Stripe says has_more.
func (s *stripeSource) run(ctx context.Context, w window, st Store, rec *claim.ReconcileRun, count func(string)) error {
	params := &stripe.EventListParams{CreatedRange: &stripe.RangeQueryParams{GreaterThanOrEqual: w.since.Unix()}}
	params.Context = ctx
	params.Limit = stripe.Int64(pageSize)
	for _, t := range s.types {
		params.Types = append(params.Types, stripe.String(t))
	}
	if s.types != nil && len(s.types) == 0 {
		return nil // no route takes any of the provider's events: nothing to list
	}
	for page := 0; ; page++ {
		if page == maxPages {
			return fmt.Errorf("stopped after %d pages of %d events: the window holds more; run again with a shorter --since", maxPages, pageSize)
		}
		var p eventPage
		err := withRateLimit(ctx, func() error {
			p = eventPage{}
			// As stripe-go's own list does: the parameters form-encoded,
			// sent as the query of a GET.
			q := &form.Values{}
			form.AppendTo(q, params)
			return s.backend.CallRaw(http.MethodGet, "/v1/events", s.secret(), []byte(q.Encode()), &stripe.Params{Context: ctx}, &p)
		}, stripeLimited)
		if err != nil {
			return stripeError(err)
		}
		if p.Object != "list" {
			return errors.New("the provider's API answered something other than a list of events")
		}
		last, err := s.page(ctx, w, st, rec, count, p.Data)
		if err != nil {
			return err
		}
		if !p.HasMore || last == "" {
			return nil
		}
		params.StartingAfter = stripe.String(last)
	}
}

// stripeLimited tells a 429 and its headers.
func stripeLimited(err error) (http.Header, bool) {
	var se *stripe.Error
	if errors.As(err, &se) && se.HTTPStatusCode == http.StatusTooManyRequests {
		if se.LastResponse != nil {
			return se.LastResponse.Header, true
		}
		return http.Header{}, true
	}
	return nil, false
}

// stripeError names a failed call by its status, never its body, which
// may quote the key.
func stripeError(err error) error {
	var se *stripe.Error
	if errors.As(err, &se) {
		return statusError(se.HTTPStatusCode)
	}
	if errors.Is(err, errRateLimited) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("calling the provider's API: %w", err)
}

// page handles one page of events and returns the id of its last (oldest).
func (s *stripeSource) page(ctx context.Context, w window, st Store, rec *claim.ReconcileRun, count func(string), data []json.RawMessage) (string, error) {
	type fetched struct {
		raw []byte
		ev  verify.Event
	}
	var todo []fetched
	var ids []string
	last := ""
	for _, raw := range data {
		var e stripeEvent
		if err := json.Unmarshal(raw, &e); err != nil || e.ID == "" {
			return "", errors.New("the provider's API listed an event that is not an event object")
		}
		last = e.ID
		rec.Listed++
		newest(rec, time.Unix(e.Created, 0))
		if !s.routed(e.Type) {
			rec.Skipped++
			count(OutcomeUnrouted)
			continue
		}
		ev, err := verify.Fetched(verify.Config{Scheme: config.SchemeStripe, ScopeFrom: s.provider.ScopeFrom}, raw)
		if err != nil || int64(len(raw)) > s.maxBody {
			s.logger.LogAttrs(ctx, slog.LevelWarn, "reconciliation left out an event ingest would refuse",
				slog.String("provider", s.provider.Name), slog.String("event_id", e.ID), slog.Int("bytes", len(raw)))
			rec.Skipped++
			count(OutcomeRefused)
			continue
		}
		todo = append(todo, fetched{raw: raw, ev: ev})
		ids = append(ids, ev.ID)
	}
	if len(ids) == 0 {
		return last, nil
	}
	claimed, err := st.ClaimedIDs(ctx, s.provider.Name, ids)
	if err != nil {
		return "", err
	}
	for _, f := range todo {
		if claimed[f.ev.ID] {
			rec.Skipped++
			count(OutcomeAlreadyClaimed)
			continue
		}
		if w.dryRun {
			rec.Claimed++
			continue
		}
		req, _ := gate.Match(ctx, s.table, claim.Event{
			Provider: s.provider.Name, ID: f.ev.ID, Type: f.ev.Type, ObjectID: f.ev.ObjectID,
			ContentType: "application/json", Payload: f.raw,
			GuardBody: s.provider.ReplayGuard == config.ReplayGuardBody, Source: claim.SourceReconcile,
		}, http.Header{}, f.ev.Body)
		res, err := st.Claim(ctx, req.Event, req.Routes, false)
		if err != nil {
			return "", err
		}
		if res.Duplicate() {
			rec.Skipped++ // claimed by a webhook since the look-up
			count(OutcomeAlreadyClaimed)
			continue
		}
		rec.Claimed++
		count(OutcomeClaimed)
	}
	return last, nil
}

// routed reports whether any of the provider's routes takes type t, by
// the route table's own type matcher.
func (s *stripeSource) routed(t string) bool {
	for _, r := range s.table.Routes() {
		if r.Provider == s.provider.Name && r.Matches(t) {
			return true
		}
	}
	return false
}

// openSecret opens the credential named by env or file through the
// resolver, the key of whichever is set naming it in errors.
func openSecret(o Options, envKey, env, fileKey, file string) (*secretfile.Secret, error) {
	check := func(b []byte) error {
		if strings.ContainsFunc(string(b), func(c rune) bool { return c < ' ' || c == 0x7f }) {
			return errors.New("holds a control character, which a credential cannot")
		}
		return nil
	}
	if file != "" {
		return o.Resolver.File(file, fileKey, check)
	}
	value := o.Getenv(env)
	if o.Redactor != nil {
		o.Redactor.Add(value)
	}
	return o.Resolver.Env(envKey, env, []byte(value), check)
}
