package reconcile

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-github/v89/github"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
)

// githubSource lists one GitHub hook's deliveries with go-github and asks
// GitHub to redeliver each failed one whose delivery id no claim holds:
// the redelivery keeps its X-GitHub-Delivery and arrives through ingest,
// signed, like any webhook.
type githubSource struct {
	provider string
	secretOf func() string
	client   *github.Client
	// The hook: owner and repo (repository), owner (organization), or
	// app (the App's own webhook, owner and id unset).
	owner, repo string
	id          int64
	app         bool
}

// newGitHub opens the token (or the App's key) of p's reconcile section.
func newGitHub(key string, p config.Provider, o Options) (*githubSource, error) {
	r := p.Reconcile
	s := &githubSource{provider: p.Name}
	var authorize func(*http.Request) error
	if r.Hook == config.ReconcileHookApp {
		signer, err := newAppSigner(o, key+".private_key_file", r.PrivateKeyFile, r.AppID)
		if err != nil {
			return nil, err
		}
		s.app, s.secretOf, authorize = true, signer.secret, signer.authorize
	} else {
		token, err := openSecret(o, key+".token_env", r.TokenEnv, key+".token_file", r.TokenFile)
		if err != nil {
			return nil, err
		}
		owner, repo, id, ok := config.ParseHook(r.Hook)
		if !ok {
			return nil, fmt.Errorf("%s.hook: %q must be repos/OWNER/REPO/hooks/ID, orgs/ORG/hooks/ID or app", key, r.Hook)
		}
		s.owner, s.repo, s.id = owner, repo, id
		s.secretOf = func() string { return string(token.Value()) }
		authorize = func(req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+string(token.Value()))
			return nil
		}
	}
	base := strings.TrimSuffix(r.APIBase, "/") + "/"
	client, err := github.NewClient(github.WithHTTPClient(httpClient(authorize)), github.WithURLs(&base, &base))
	if err != nil {
		return nil, fmt.Errorf("%s.api_base: %w", key, err)
	}
	s.client = client
	return s, nil
}

func (s *githubSource) secret() string { return s.secretOf() }

// list lists one page of the hook's deliveries.
func (s *githubSource) list(ctx context.Context, opts *github.ListCursorOptions) ([]*github.HookDelivery, *github.Response, error) {
	switch {
	case s.app:
		return s.client.Apps.ListHookDeliveries(ctx, opts)
	case s.repo == "":
		return s.client.Organizations.ListHookDeliveries(ctx, s.owner, s.id, opts)
	default:
		return s.client.Repositories.ListHookDeliveries(ctx, s.owner, s.repo, s.id, opts)
	}
}

// redeliver asks GitHub to deliver delivery id again.
func (s *githubSource) redeliver(ctx context.Context, id int64) error {
	var err error
	switch {
	case s.app:
		_, _, err = s.client.Apps.RedeliverHookDelivery(ctx, id)
	case s.repo == "":
		_, _, err = s.client.Organizations.RedeliverHookDelivery(ctx, s.owner, s.id, id)
	default:
		_, _, err = s.client.Repositories.RedeliverHookDelivery(ctx, s.owner, s.repo, s.id, id)
	}
	var accepted *github.AcceptedError
	if errors.As(err, &accepted) {
		return nil // 202: GitHub queued the redelivery
	}
	return err
}

// delivered is what a run learns of one delivery id (guid) from its
// attempts in the window.
type delivered struct {
	ok bool // an attempt was answered 2xx: hookgate has it
	// failed is the id of a failed first delivery (not a redelivery),
	// 0 when none: a redelivery that failed is not asked for again by a
	// scheduled run, so that a failing ingest costs one redelivery per
	// event, not one per run.
	failed int64
}

// run implements source: it lists the hook's deliveries, newest first,
// page by page (the cursor of the Link header), until one was delivered
// before w.since, then redelivers those that failed and are not claimed.
func (s *githubSource) run(ctx context.Context, w window, st Store, rec *claim.ReconcileRun, count func(string)) error {
	byGUID, order, err := s.listWindow(ctx, w, rec)
	if err != nil {
		return err
	}
	var todo []string
	for _, guid := range order {
		if d := byGUID[guid]; !d.ok && d.failed != 0 {
			todo = append(todo, guid)
		} else {
			rec.Skipped++
			count(OutcomeDelivered)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	claimed, err := st.ClaimedIDs(ctx, s.provider, todo)
	if err != nil {
		return err
	}
	for _, guid := range todo {
		switch {
		case claimed[guid]:
			rec.Skipped++
			count(OutcomeAlreadyClaimed)
		case w.dryRun:
			rec.Redelivered++
		default:
			id := byGUID[guid].failed
			if err := withRateLimit(ctx, func() error { return s.redeliver(ctx, id) }, githubLimited); err != nil {
				return githubError(err)
			}
			rec.Redelivered++
			count(OutcomeRedelivered)
		}
	}
	return nil
}

// listWindow lists the deliveries of the window, by guid, in the order
// first seen (newest first).
func (s *githubSource) listWindow(ctx context.Context, w window, rec *claim.ReconcileRun) (map[string]*delivered, []string, error) {
	byGUID := map[string]*delivered{}
	var order []string
	opts := &github.ListCursorOptions{PerPage: pageSize}
	for page := 0; ; page++ {
		if page == maxPages {
			return nil, nil, fmt.Errorf("stopped after %d pages of %d deliveries: the window holds more; run again with a shorter --since", maxPages, pageSize)
		}
		var ds []*github.HookDelivery
		var resp *github.Response
		err := withRateLimit(ctx, func() (err error) {
			ds, resp, err = s.list(ctx, opts)
			return err
		}, githubLimited)
		if err != nil {
			return nil, nil, githubError(err)
		}
		done := false
		for _, d := range ds {
			at := d.GetDeliveredAt().Time
			if at.Before(w.since) {
				done = true // newest first: the rest are older still
				break
			}
			guid := d.GetGUID()
			if guid == "" || d.GetID() == 0 {
				return nil, nil, errors.New("the provider's API listed a delivery without a guid or an id")
			}
			rec.Listed++
			newest(rec, at)
			e, ok := byGUID[guid]
			if !ok {
				e = &delivered{}
				byGUID[guid] = e
				order = append(order, guid)
			}
			code := d.GetStatusCode()
			switch {
			case code >= 200 && code < 300:
				e.ok = true
			case !d.GetRedelivery() && e.failed == 0:
				e.failed = d.GetID()
			}
		}
		if done || resp == nil || resp.Cursor == "" || len(ds) == 0 {
			return byGUID, order, nil
		}
		opts.Cursor = resp.Cursor
	}
}

// githubLimited tells a 429 (or a secondary rate limit) and its headers.
func githubLimited(err error) (http.Header, bool) {
	var abuse *github.AbuseRateLimitError
	if errors.As(err, &abuse) && abuse.Response != nil {
		h := abuse.Response.Header.Clone()
		if abuse.RetryAfter != nil {
			h.Set("Retry-After", fmt.Sprint(int(abuse.RetryAfter.Seconds())))
		}
		return h, true
	}
	var rl *github.RateLimitError
	if errors.As(err, &rl) && rl.Response != nil {
		h := rl.Response.Header.Clone()
		if h.Get("Retry-After") == "" {
			h.Set("Retry-After", fmt.Sprint(max(int(time.Until(rl.Rate.Reset.Time).Seconds())+1, 1)))
		}
		return h, true
	}
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusTooManyRequests {
		return er.Response.Header, true
	}
	return nil, false
}

// githubError names a failed call by its status, never its body.
func githubError(err error) error {
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		return statusError(er.Response.StatusCode)
	}
	if errors.Is(err, errRateLimited) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("calling the provider's API: %w", err)
}
