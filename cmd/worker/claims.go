package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/hookgate/hookgate/cmd/internal/cli"
	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/deliver"
)

const claimsUsage = `worker claims list [--status S] [--provider P] [--limit N] [--json]
       worker claims show PROVIDER EVENT_ID [--json]
       worker claims retry PROVIDER EVENT_ID [--force]
       worker claims retry --status failed [--provider P]`

// retryBatch is how many failed claims `claims retry --status failed` reads
// at a time.
const retryBatch = 500

// lastErrorWidth is how much of a last error the tables show; --json and
// `claims show --json` carry it whole.
const lastErrorWidth = 60

// runClaims is `worker claims`: operator commands over the claim table. They
// need DATABASE_URL and the config file (for routes' max_attempts), but no
// secrets.
func runClaims(ctx context.Context, args []string, env cli.Env) error {
	if len(args) == 0 {
		return errors.New("claims needs a command: list, show or retry (see worker claims --help)")
	}
	switch args[0] {
	case "list":
		return claimsList(ctx, args[1:], env)
	case "show":
		return claimsShow(ctx, args[1:], env)
	case "retry":
		return claimsRetry(ctx, args[1:], env)
	case "-h", "-help", "--help", "help":
		fmt.Fprintf(env.Stderr, "usage: %s\n", claimsUsage)
		return cli.ErrHelp
	}
	return fmt.Errorf("unknown claims command %q: want list, show or retry (see worker claims --help)", args[0])
}

// parse parses flags wherever they sit among the arguments (`show stripe
// evt_1 --json` as well as `show --json stripe evt_1`) and returns the
// positional ones.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// openStore connects for a claims command: config, pool, and a store whose
// jobs are inserted by an insert-only River client.
func openStore(ctx context.Context, common cli.Common, env cli.Env) (*config.Config, *claim.Store, *pgxpool.Pool, error) {
	cfg, err := cli.LoadConfig(common, env)
	if err != nil {
		return nil, nil, nil, err
	}
	pool, err := cli.OpenPool(ctx, env)
	if err != nil {
		return nil, nil, nil, err
	}
	jobs, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	if err != nil {
		pool.Close()
		return nil, nil, nil, fmt.Errorf("creating job client: %w", err)
	}
	return cfg, claim.NewStore(pool, jobs, cfg.MaxAttempts), pool, nil
}

func claimsList(ctx context.Context, args []string, env cli.Env) error {
	const use = "worker claims list [--status S] [--provider P] [--limit N] [--json]"
	var (
		common cli.Common
		f      claim.Filter
		status string
		asJSON bool
	)
	fs := cli.NewFlagSet("worker claims list", use, env, &common)
	fs.StringVar(&status, "status", "", "only claims with this status: processing, completed, failed or ignored")
	fs.StringVar(&f.Provider, "provider", "", "only claims of this provider")
	fs.IntVar(&f.Limit, "limit", 50, "at most this many claims, newest first")
	fs.BoolVar(&asJSON, "json", false, "one JSON object per line instead of a table")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("unexpected argument %q (usage: %s)", rest[0], use)
	}
	if status != "" {
		f.Status = claim.Status(status)
		if !validStatus(f.Status) {
			return fmt.Errorf("--status %q: must be processing, completed, failed or ignored", status)
		}
	}
	if f.Limit < 1 {
		return fmt.Errorf("--limit must be at least 1, got %d", f.Limit)
	}
	_, store, pool, err := openStore(ctx, common, env)
	if err != nil {
		return err
	}
	defer pool.Close()
	claims, err := store.List(ctx, f)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(env.Stdout)
		for _, c := range claims {
			if err := enc.Encode(c); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tEVENT ID\tEVENT TYPE\tSTATUS\tATTEMPTS\tFIRST SEEN\tLAST ERROR")
	for _, c := range claims {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", c.Provider, c.EventID, orDash(c.EventType), c.Status,
			c.AttemptCount, stamp(&c.FirstSeenAt), orDash(cut(c.LastError, lastErrorWidth)))
	}
	return tw.Flush()
}

// deliveryView is one delivery as `claims show` prints it.
type deliveryView struct {
	Route          string       `json:"route"`
	Status         claim.Status `json:"status"`
	AttemptCount   int          `json:"attempt_count"`
	MaxAttempts    int          `json:"max_attempts,omitempty"`
	LastError      string       `json:"last_error,omitempty"`
	IdempotencyKey string       `json:"idempotency_key"`
	UpdatedAt      time.Time    `json:"updated_at"`
	CompletedAt    *time.Time   `json:"completed_at,omitempty"`
}

// claimView is a claim with its deliveries, as `claims show` prints it.
type claimView struct {
	claim.Claim
	Deliveries []deliveryView `json:"deliveries"`
}

func claimsShow(ctx context.Context, args []string, env cli.Env) error {
	const use = "worker claims show PROVIDER EVENT_ID [--json]"
	var (
		common cli.Common
		asJSON bool
	)
	fs := cli.NewFlagSet("worker claims show", use, env, &common)
	fs.BoolVar(&asJSON, "json", false, "one JSON object instead of text")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 2 {
		return fmt.Errorf("claims show takes PROVIDER and EVENT_ID (usage: %s)", use)
	}
	cfg, store, pool, err := openStore(ctx, common, env)
	if err != nil {
		return err
	}
	defer pool.Close()
	c, ds, err := store.Get(ctx, rest[0], rest[1])
	if errors.Is(err, claim.ErrNotFound) {
		return fmt.Errorf("no claim %s/%s", rest[0], rest[1])
	}
	if err != nil {
		return err
	}
	v := claimView{Claim: c, Deliveries: make([]deliveryView, len(ds))}
	for i, d := range ds {
		r, _ := cfg.Route(d.Route)
		v.Deliveries[i] = deliveryView{
			Route: d.Route, Status: d.Status, AttemptCount: d.AttemptCount, MaxAttempts: r.MaxAttempts,
			LastError: d.LastError, IdempotencyKey: deliver.IdempotencyKey(c.Provider, c.EventID, d.Route),
			UpdatedAt: d.UpdatedAt, CompletedAt: d.CompletedAt,
		}
	}
	if asJSON {
		return json.NewEncoder(env.Stdout).Encode(v)
	}
	return printClaim(env.Stdout, v)
}

func printClaim(w io.Writer, v claimView) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, row := range [][2]string{
		{"claim", v.Provider + "/" + v.EventID},
		{"event type", orDash(v.EventType)},
		{"object id", orDash(v.ObjectID)},
		{"status", string(v.Status)},
		{"attempts", fmt.Sprint(v.AttemptCount)},
		{"first seen", stamp(&v.FirstSeenAt)},
		{"updated", stamp(&v.UpdatedAt)},
		{"completed", stamp(v.CompletedAt)},
		{"last error", orDash(v.LastError)},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", row[0], row[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(v.Deliveries) == 0 {
		_, err := fmt.Fprintln(w, "\nno deliveries (no route matched the event type)")
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ROUTE\tSTATUS\tATTEMPTS\tUPDATED\tCOMPLETED\tIDEMPOTENCY-KEY\tLAST ERROR")
	for _, d := range v.Deliveries {
		attempts := fmt.Sprint(d.AttemptCount)
		if d.MaxAttempts > 0 {
			attempts += fmt.Sprintf(" (max_attempts %d)", d.MaxAttempts)
		} else {
			attempts += " (route no longer configured)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Route, d.Status, attempts, stamp(&d.UpdatedAt),
			stamp(d.CompletedAt), d.IdempotencyKey, orDash(d.LastError))
	}
	return tw.Flush()
}

func claimsRetry(ctx context.Context, args []string, env cli.Env) error {
	const use = "worker claims retry PROVIDER EVENT_ID [--force] | worker claims retry --status failed [--provider P]"
	var (
		common   cli.Common
		status   string
		provider string
		force    bool
	)
	fs := cli.NewFlagSet("worker claims retry", use, env, &common)
	fs.StringVar(&status, "status", "", "retry every claim with this status; only failed is accepted")
	fs.StringVar(&provider, "provider", "", "with --status: only claims of this provider")
	fs.BoolVar(&force, "force", false, "also re-run completed deliveries, and accept completed claims (same Idempotency-Keys downstream)")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	switch {
	case status == "" && len(rest) != 2:
		return fmt.Errorf("claims retry takes PROVIDER and EVENT_ID, or --status failed (usage: %s)", use)
	case status != "" && len(rest) > 0:
		return fmt.Errorf("claims retry takes either PROVIDER EVENT_ID or --status, not both (usage: %s)", use)
	case status != "" && status != string(claim.Failed):
		return fmt.Errorf("--status %q: only failed claims can be retried in bulk", status)
	case status == "" && provider != "":
		return fmt.Errorf("--provider applies only with --status failed; name the claim as PROVIDER EVENT_ID")
	}
	_, store, pool, err := openStore(ctx, common, env)
	if err != nil {
		return err
	}
	defer pool.Close()
	if status == "" {
		return retryOne(ctx, store, rest[0], rest[1], force, env.Stdout)
	}
	return retryFailed(ctx, store, provider, force, env.Stdout)
}

func retryOne(ctx context.Context, store *claim.Store, provider, eventID string, force bool, out io.Writer) error {
	n, err := store.Reopen(ctx, provider, eventID, force)
	switch {
	case errors.Is(err, claim.ErrNotFound):
		return fmt.Errorf("no claim %s/%s", provider, eventID)
	case errors.Is(err, claim.ErrConflict):
		return refusal(ctx, store, provider, eventID, force)
	case err != nil:
		return err
	}
	fmt.Fprintf(out, "%s/%s: reopened %s; %s queued\n", provider, eventID, plural(n, "delivery", "deliveries"), plural(n, "job", "jobs"))
	return nil
}

// refusal explains why a claim was not reopened.
func refusal(ctx context.Context, store *claim.Store, provider, eventID string, force bool) error {
	c, _, err := store.Get(ctx, provider, eventID)
	if err != nil {
		return fmt.Errorf("%s/%s was not retried: %w", provider, eventID, err)
	}
	key := provider + "/" + eventID
	switch {
	case c.Status == claim.Completed && !force:
		return fmt.Errorf("%s is completed: every delivery succeeded; pass --force to run them all again (same Idempotency-Keys, so a deduplicating downstream will not repeat the effect)", key)
	case c.Status == claim.Processing:
		return fmt.Errorf("%s is still processing: its deliveries are queued or being attempted; retry it once it has failed", key)
	case c.Status == claim.Ignored:
		return fmt.Errorf("%s is ignored: no route matched its event type, so there is nothing to deliver", key)
	}
	return fmt.Errorf("%s is %s and was not retried", key, c.Status)
}

func retryFailed(ctx context.Context, store *claim.Store, provider string, force bool, out io.Writer) error {
	seen := map[[2]string]bool{}
	var claims, deliveries int
	for {
		keys, err := store.FailedKeys(ctx, provider, retryBatch)
		if err != nil {
			return err
		}
		fresh := 0
		for _, k := range keys {
			// A claim reopened here that fails again at once comes back in
			// the next batch; it is not retried twice in one run.
			if seen[k] {
				continue
			}
			seen[k] = true
			fresh++
			n, err := store.Reopen(ctx, k[0], k[1], force)
			if errors.Is(err, claim.ErrConflict) || errors.Is(err, claim.ErrNotFound) {
				continue // retried or deleted meanwhile
			}
			if err != nil {
				return fmt.Errorf("after reopening %s of %s: %w",
					plural(deliveries, "delivery", "deliveries"), plural(claims, "claim", "claims"), err)
			}
			claims++
			deliveries += n
			fmt.Fprintf(out, "%s/%s: reopened %s\n", k[0], k[1], plural(n, "delivery", "deliveries"))
		}
		if fresh == 0 {
			break
		}
	}
	fmt.Fprintf(out, "reopened %s of %s\n", plural(deliveries, "delivery", "deliveries"), plural(claims, "failed claim", "failed claims"))
	return nil
}

func validStatus(s claim.Status) bool {
	switch s {
	case claim.Processing, claim.Completed, claim.Failed, claim.Ignored:
		return true
	}
	return false
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func stamp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cut shortens s for a table column.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return strings.TrimSpace(string(r[:n-1])) + "…"
}
