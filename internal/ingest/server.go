// Package ingest serves the webhook endpoint: it verifies each request on its
// raw bytes, claims the event and enqueues its deliveries in one transaction,
// and answers the provider only after that transaction committed.
package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/logbudget"
	"github.com/hookgate/hookgate/internal/route"
	"github.com/hookgate/hookgate/internal/sanitize"
	"github.com/hookgate/hookgate/internal/secretfile"
	"github.com/hookgate/hookgate/internal/verify"
)

// Pinger reports whether the database answers; the pool implements it.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Claimer records a verified event; *Group implements it.
type Claimer interface {
	Claim(ctx context.Context, ev claim.Event, routes []string, reopen bool) (claim.Result, error)
}

// provider is what a request to /webhooks/{name} needs, looked up once.
type provider struct {
	verifier verify.Verifier
	// reopen: a redelivery of a failed event reopens it (on_failed_redelivery).
	reopen bool
	// guardBody: the replay guard is on (replay_guard: body).
	guardBody bool
	// named holds the event types that a route of this provider names
	// exactly: the only ones counted under their own label.
	named map[string]bool
}

// typeLabel is the metric label of a verified event type: the type when a
// route names it, else otherLabel, so the series count is set by the config.
func (p provider) typeLabel(t string) string {
	if p.named[t] {
		return t
	}
	return otherLabel
}

// Server is the ingest HTTP server.
type Server struct {
	cfg       *config.Config
	providers map[string]provider
	table     *route.Table
	claims    Claimer
	db        Pinger
	// cells, when set (WithCells), are what /readyz checks instead of db.
	cells   []CellPinger
	logger  *slog.Logger
	metrics *metrics
	now     func() time.Time
	echo    *echo.Echo
	// inFlight holds one token per webhook request being read or claimed.
	inFlight chan struct{}
	tracer   tracer
	// lines samples the INFO lines of accepted requests.
	lines *logbudget.Budget
	// redactor learns the secrets a provider's files bring in after start
	// (see WithRedactor); nil for none.
	redactor atomic.Pointer[sanitize.Redactor]
}

// WithRedactor makes every secret a provider's secrets_file or
// public_keys_file brings in after start join r, the redactor of the
// binary's logs, from the moment it is used.
func (s *Server) WithRedactor(r *sanitize.Redactor) *Server {
	s.redactor.Store(r)
	return s
}

// redactNew adds a provider's new file contents to the redactor, the one
// WithRedactor set (none before).
func (s *Server) redactNew(values ...string) {
	if r := s.redactor.Load(); r != nil {
		r.Add(values...)
	}
}

// New builds the server over cfg's routes, compiled (route.New). It fails
// when a provider's verifier cannot be built from its settings and secrets.
func New(cfg *config.Config, table *route.Table, secrets config.Secrets, claims Claimer, db Pinger, logger *slog.Logger, reg *prometheus.Registry) (*Server, error) {
	s := &Server{
		table:     table,
		cfg:       cfg,
		providers: map[string]provider{},
		claims:    claims,
		db:        db,
		logger:    logger,
		metrics:   newMetrics(reg, cfg),
		now:       time.Now,
		inFlight:  make(chan struct{}, cfg.Ingest.MaxInFlight),
		lines:     logbudget.New(requestLinesPerSecond, requestLinesSummary),
	}
	for i, p := range cfg.Providers {
		// A public key of the wrong type is refused naming the setting it
		// came from (files are checked as they are read).
		for j, name := range p.PublicKeysEnv {
			if keys := secrets.Provider[p.Name]; j < len(keys) {
				if err := verify.CheckPublicKey(p.Scheme, keys[j]); err != nil {
					return nil, fmt.Errorf("providers[%d].public_keys_env[%d]: environment variable %s %w", i, j, name, err)
				}
			}
		}
		vc := verify.Config{
			Scheme:          p.Scheme,
			Secrets:         secrets.Provider[p.Name],
			Tolerance:       p.Tolerance.D(),
			Header:          p.Header,
			Prefix:          p.Prefix,
			Encoding:        p.Encoding,
			IDFrom:          p.IDFrom,
			TypeFrom:        p.TypeFrom,
			TimestampHeader: p.TimestampHeader,
			NotificationURL: p.NotificationURL,
			WebhookID:       p.WebhookID,
			CertFile:        p.CertFile,
			CAFile:          p.CAFile,
			ScopeFrom:       p.ScopeFrom,
		}
		var v verify.Verifier
		var err error
		if files := providerFiles(i, p); len(files) > 0 {
			build := func(secrets [][]byte) (verify.Verifier, error) {
				c := vc
				c.Secrets = secrets
				return verify.New(c)
			}
			var fv *fileVerifier
			res := secretfile.Resolver{Logger: logger, Redact: s.redactNew}
			if fv, err = newFileVerifier(p.Name, files, vc.Secrets, build, res); err == nil {
				v = fv
			}
		} else {
			v, err = verify.New(vc)
		}
		if err != nil {
			return nil, fmt.Errorf("providers[%d] (%s): %w", i, p.Name, err)
		}
		named := map[string]bool{}
		for _, r := range cfg.Routes {
			if r.Provider != p.Name {
				continue
			}
			for _, e := range r.Events {
				if !strings.ContainsAny(e, `*?[\`) {
					named[e] = true
				}
			}
		}
		s.providers[p.Name] = provider{
			verifier:  v,
			reopen:    p.OnFailedRedelivery == config.RedeliveryReopen,
			guardBody: p.ReplayGuard == config.ReplayGuardBody,
			named:     named,
		}
	}
	s.echo = s.routes(reg)
	return s, nil
}

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.echo }
