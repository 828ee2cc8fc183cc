package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hookgate/hookgate/cmd/internal/cli"
	"github.com/hookgate/hookgate/internal/claim"
)

const claimsExportUsage = "worker claims export [--status S] [--provider P] [--since T] [--before T] [--payloads]"

// exportView is one line of `claims export`: the claim as `claims show
// --json` prints it, with its payload when asked for.
type exportView struct {
	claim.View
	// Payload is the raw body (base64 in JSON); absent once cleared.
	Payload []byte `json:"payload,omitempty"`
}

// claimsExportCommand is `worker claims export`.
type claimsExportCommand struct {
	common cli.Common
	env    cli.Env
}

// Run streams claims with their deliveries as JSON Lines, oldest first, in
// constant memory.
func (c *claimsExportCommand) Run(ctx context.Context, args []string) error {
	var (
		common        = c.common
		env           = c.env
		f             claim.Search
		payloads      bool
		status        string
		since, before string
	)
	fs := cli.NewFlagSet("worker claims export", claimsExportUsage, env, &common)
	fs.StringVar(&status, "status", "", "only claims with this status: processing, completed, failed or ignored")
	fs.StringVar(&f.Provider, "provider", "", "only claims of this provider")
	fs.StringVar(&since, "since", "", "only claims first seen at or after this RFC 3339 time")
	fs.StringVar(&before, "before", "", "only claims first seen before this RFC 3339 time")
	fs.BoolVar(&payloads, "payloads", false, "add each claim's raw payload, base64-encoded (absent once retention cleared it)")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("unexpected argument %q (usage: %s)", rest[0], claimsExportUsage)
	}
	if status != "" {
		f.Status = claim.Status(status)
		if !validStatus(f.Status) {
			return fmt.Errorf("--status %q: must be processing, completed, failed or ignored", status)
		}
	}
	for _, t := range []struct {
		flag, value string
		dst         *time.Time
	}{{"--since", since, &f.Since}, {"--before", before, &f.Before}} {
		if t.value == "" {
			continue
		}
		if *t.dst, err = time.Parse(time.RFC3339Nano, t.value); err != nil {
			return fmt.Errorf("%s %q: want an RFC 3339 time such as 2026-12-01T00:00:00Z", t.flag, t.value)
		}
	}
	if !f.Since.IsZero() && !f.Before.IsZero() && !f.Since.Before(f.Before) {
		return fmt.Errorf("--since %s is not before --before %s: nothing could match", since, before)
	}
	cfg, store, pool, err := openStore(ctx, common, env)
	if err != nil {
		return err
	}
	defer pool.Close()

	w := bufio.NewWriter(env.Stdout)
	enc := json.NewEncoder(w)
	var v exportView
	err = store.Export(ctx, f, payloads, func(e *claim.Exported) error {
		v.Record, v.Payload = e.Record, e.Payload
		v.Deliveries = claim.AppendDeliveryViews(v.Deliveries[:0], e.Deliveries, cfg.MaxAttempts)
		for i, d := range e.Deliveries {
			v.Deliveries[i].SetAttempts(d.Attempts)
		}
		return enc.Encode(&v)
	})
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	return err
}
