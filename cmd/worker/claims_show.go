package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/hookgate/hookgate/cmd/internal/cli"
	"github.com/hookgate/hookgate/internal/claim"
)

// claimsShowCommand is `worker claims show`.
type claimsShowCommand struct {
	common cli.Common
	env    cli.Env
}

// Run prints one claim and its deliveries, as text or as one JSON object.
func (c *claimsShowCommand) Run(ctx context.Context, args []string) error {
	const use = "worker claims show PROVIDER EVENT_ID [--json]"
	var (
		common = c.common
		env    = c.env
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
	cfg, store, pool, err := openStoreOf(ctx, common, env, rest[0])
	if err != nil {
		return err
	}
	defer pool.Close()
	cl, ds, err := store.Get(ctx, rest[0], rest[1])
	if errors.Is(err, claim.ErrNotFound) {
		return fmt.Errorf("no claim %s/%s", rest[0], rest[1])
	}
	if err != nil {
		return err
	}
	attempts, err := store.Attempts(ctx, rest[0], rest[1], false)
	if err != nil {
		return err
	}
	v := claim.View{Record: cl, Deliveries: claim.AppendDeliveryViews(make([]claim.DeliveryView, 0, len(ds)), ds, cfg.MaxAttempts)}
	for i := range v.Deliveries {
		v.Deliveries[i].SetAttempts(attempts[v.Deliveries[i].Route])
	}
	if asJSON {
		return json.NewEncoder(env.Stdout).Encode(v)
	}
	return printClaim(env.Stdout, v)
}

func printClaim(w io.Writer, v claim.View) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, row := range [][2]string{
		{"claim", v.Provider + "/" + v.EventID},
		{"event type", orDash(v.EventType)},
		{"object id", orDash(v.ObjectID)},
		{"status", string(v.Status)},
		{"source", orDash(v.Source)},
		{"attempts", fmt.Sprint(v.AttemptCount)},
		{"first seen", stamp(&v.FirstSeenAt)},
		{"updated", stamp(&v.UpdatedAt)},
		{"completed", stamp(v.CompletedAt)},
		{"terminal", stamp(v.TerminalAt)},
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
	fmt.Fprintln(tw, "ROUTE\tSTATUS\tATTEMPTS\tUPDATED\tCOMPLETED\tIDEMPOTENCY-KEY\tRESULT\tLAST ERROR")
	for _, d := range v.Deliveries {
		attempts := fmt.Sprint(d.AttemptCount)
		if d.MaxAttempts > 0 {
			attempts += fmt.Sprintf(" (max_attempts %d)", d.MaxAttempts)
		} else {
			attempts += " (route no longer configured)"
		}
		status := string(d.Status)
		if len(d.After) > 0 {
			status += " (after " + strings.Join(d.After, ", ") + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Route, status, attempts, stamp(&d.UpdatedAt),
			stamp(d.CompletedAt), d.IdempotencyKey, orDash(string(d.Result)), orDash(d.LastError))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, d := range v.Deliveries {
		if d.Attempts == nil || len(*d.Attempts) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nattempts of %s:\n", d.Route)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ATTEMPT\tSTARTED\tDURATION\tSTATUS\tERROR")
		for _, a := range *d.Attempts {
			status := "-"
			if a.StatusCode != nil {
				status = fmt.Sprint(*a.StatusCode)
			}
			e := ""
			if a.Error != nil {
				e = *a.Error
			}
			fmt.Fprintf(tw, "%d\t%s\t%dms\t%s\t%s\n", a.Attempt, stamp(&a.StartedAt), a.DurationMS, status, orDash(cut(e, lastErrorWidth)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	held := false
	for _, d := range v.Deliveries {
		if d.BusinessKey != "" {
			// --json carries the key whole; a key can be as long as the body.
			fmt.Fprintf(w, "\n%s holds business key %s", d.Route, cut(d.BusinessKey, 200))
			held = true
		}
	}
	if held {
		fmt.Fprintln(w)
	}
	return nil
}
