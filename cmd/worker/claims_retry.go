package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/hookgate/hookgate/cmd/internal/cli"
	"github.com/hookgate/hookgate/internal/claim"
)

// claimsRetryCommand is `worker claims retry`.
type claimsRetryCommand struct {
	common cli.Common
	env    cli.Env
}

// Run reopens one claim, or every failed claim, and queues their jobs.
func (c *claimsRetryCommand) Run(ctx context.Context, args []string) error {
	const use = "worker claims retry PROVIDER EVENT_ID [--force] | worker claims retry --status failed [--provider P]"
	var (
		common   = c.common
		env      = c.env
		status   string
		provider string
		force    bool
	)
	fs := cli.NewFlagSet("worker claims retry", use, env, &common)
	fs.StringVar(&status, "status", "", "retry every claim with this status; only failed is accepted")
	fs.StringVar(&provider, "provider", "", "with --status: only claims of this provider")
	fs.BoolVar(&force, "force", false, "also re-run completed deliveries, and accept completed claims (same Idempotency-Keys downstream); skipped deliveries stay skipped")
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
		return refusal(ctx, store, provider, eventID, force, err)
	case err != nil:
		return err
	}
	fmt.Fprintf(out, "%s/%s: reopened %s; %s queued\n", provider, eventID, plural(n, "delivery", "deliveries"), plural(n, "job", "jobs"))
	if _, ds, err := store.Get(ctx, provider, eventID); err == nil {
		if note := leftAlone(ds); note != "" {
			fmt.Fprintf(out, "%s/%s: %s\n", provider, eventID, note)
		}
	}
	return nil
}

// leftAlone says which deliveries a retry never reopens, and why: skipped
// ones (another claim holds their business key; --force does not override
// one) and those failed because their business key could not be computed
// (they would run without it). Empty when there are none.
func leftAlone(ds []claim.Delivery) string {
	var skipped, unkeyed int
	for _, d := range ds {
		switch {
		case d.Status == claim.DeliverySkipped:
			skipped++
		case d.Status == claim.DeliveryFailed && d.BusinessKeyMissing:
			unkeyed++
		}
	}
	var notes []string
	if skipped > 0 {
		notes = append(notes, fmt.Sprintf("%s left skipped: another claim holds the business key, and --force does not override a business key",
			plural(skipped, "delivery", "deliveries")))
	}
	if unkeyed > 0 {
		notes = append(notes, fmt.Sprintf("%s left failed: the business key could not be computed from the event, and a retry would send it without its key",
			plural(unkeyed, "delivery", "deliveries")))
	}
	return strings.Join(notes, "; ")
}

// refusal explains why a claim was not reopened, from the status the
// refusal carries; for an ignored or failed claim, whose deliveries may be
// left alone for their business key, from its deliveries too.
func refusal(ctx context.Context, store *claim.Store, provider, eventID string, force bool, err error) error {
	key := provider + "/" + eventID
	status, _ := claim.ConflictStatus(err)
	var note string
	if status == claim.Ignored || status == claim.Failed {
		if _, ds, gerr := store.Get(ctx, provider, eventID); gerr == nil {
			note = leftAlone(ds)
		}
	}
	switch {
	case status == claim.Ignored && note != "":
		return fmt.Errorf("%s is ignored: every delivery was skipped because another claim holds its business key (see claims show); --force does not override a business key", key)
	case status == claim.Failed && note != "":
		return fmt.Errorf("%s was not retried: %s", key, note)
	case status == claim.Completed && !force:
		return fmt.Errorf("%s is completed: every delivery succeeded; pass --force to run them all again (same Idempotency-Keys, so a deduplicating downstream will not repeat the effect)", key)
	case status == claim.Processing:
		return fmt.Errorf("%s is still processing: its deliveries are queued or being attempted; retry it once it has failed", key)
	case status == claim.Ignored:
		return fmt.Errorf("%s is ignored: no route matched its event type, so there is nothing to deliver", key)
	}
	return fmt.Errorf("%s was not retried: %w", key, err)
}

func retryFailed(ctx context.Context, store *claim.Store, provider string, force bool, out io.Writer) error {
	claims, deliveries, err := store.ReopenFailed(ctx, provider, force, func(k claim.EventKey, n int) {
		fmt.Fprintf(out, "%s: reopened %s\n", k, plural(n, "delivery", "deliveries"))
	})
	if err != nil {
		return fmt.Errorf("after reopening %s of %s: %w",
			plural(deliveries, "delivery", "deliveries"), plural(claims, "claim", "claims"), err)
	}
	fmt.Fprintf(out, "reopened %s of %s\n", plural(deliveries, "delivery", "deliveries"), plural(claims, "failed claim", "failed claims"))
	return nil
}
