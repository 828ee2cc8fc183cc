package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hookgate/hookgate/cmd/internal/cli"
	"github.com/hookgate/hookgate/internal/cell"
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
	cfg, cells, down, closeAll, err := cellStores(ctx, common, env)
	if err != nil {
		return err
	}
	defer closeAll()
	if len(down) > 0 {
		return fmt.Errorf("cell %s cannot be read: an export needs every cell", down[0])
	}
	w := bufio.NewWriter(env.Stdout)
	err = exportCells(ctx, cells, f, payloads, cfg.MaxAttempts, w)
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	return err
}

// exportLine is one claim of a cell's export, encoded, and its place in
// the order.
type exportLine struct {
	pos  claim.Position
	line []byte
}

// exportCells streams every cell's export at once, merged oldest first,
// each cell holding a few lines ahead at most, so memory stays constant
// whatever the cells' sizes. A cell whose export fails ends the export,
// naming it.
func exportCells(ctx context.Context, cells []cellStore, f claim.Search, payloads bool, maxAttempts func(string) int, w io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lines := make([]chan exportLine, len(cells))
	errs := make([]error, len(cells))
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // before waiting: the exports still sending stop
	for i, c := range cells {
		lines[i] = make(chan exportLine, 16)
		wg.Go(func() {
			defer close(lines[i])
			var v exportView
			errs[i] = c.store.Export(ctx, f, payloads, func(e *claim.Exported) error {
				v.Record, v.Payload = e.Record, e.Payload
				v.Deliveries = claim.AppendDeliveryViews(v.Deliveries[:0], e.Deliveries, maxAttempts)
				for i, d := range e.Deliveries {
					v.Deliveries[i].SetAttempts(d.Attempts)
				}
				var buf bytes.Buffer
				if err := json.NewEncoder(&buf).Encode(&v); err != nil {
					return err
				}
				select {
				case lines[i] <- exportLine{e.Position(), buf.Bytes()}:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
		})
	}
	heads := make([]*exportLine, len(cells))
	for {
		next := -1
		for i := range cells {
			if heads[i] == nil {
				if l, ok := <-lines[i]; ok {
					heads[i] = &l
				} else if errs[i] != nil {
					if len(cells) == 1 {
						return errs[i]
					}
					return fmt.Errorf("cell %s: %w", cells[i].name, errs[i])
				}
			}
			if heads[i] != nil && (next < 0 || cell.NewestFirst(heads[i].pos, heads[next].pos) > 0) {
				next = i
			}
		}
		if next < 0 {
			return nil
		}
		if _, err := w.Write(heads[next].line); err != nil {
			return err
		}
		heads[next] = nil
	}
}
