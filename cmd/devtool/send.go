package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/hookgate/hookgate/internal/devlocal"
)

// send is `devtool send`: it builds one Standard Webhooks event, signs it
// once, and posts the same signed request --times times, one after another,
// as a sender retrying a delivery would. Ingest should accept the first and
// answer every other as a duplicate.
func send(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := devlocal.NewFlagSet("send", "send [--url URL] [--times N] [--id ID] [--type TYPE]", stderr)
	url := fs.String("url", "http://127.0.0.1:8080/webhooks/demo", "ingest endpoint of a standard-webhooks provider")
	times := fs.Int("times", 2, "how many times to post the same signed event")
	id := fs.String("id", "", "event id (webhook-id); default evt_ and random hex")
	typ := fs.String("type", "invoice.paid", "event type")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("send takes no arguments, got %q", fs.Args())
	}
	if *times < 1 {
		return fmt.Errorf("--times must be at least 1, got %d", *times)
	}
	if *id == "" {
		*id = "evt_" + devlocal.RandomHex(8)
	}

	// The secret `devtool run` gives ingest when DEMO_WEBHOOK_SECRET is unset.
	wh, err := standardwebhooks.NewWebhook(cmp.Or(getenv("DEMO_WEBHOOK_SECRET"), demoWebhookSecret))
	if err != nil {
		return fmt.Errorf("DEMO_WEBHOOK_SECRET is not whsec_ followed by base64: %w", err)
	}
	now := time.Now()
	body, err := json.Marshal(devlocal.DemoEvent{
		ID:        *id,
		Type:      *typ,
		Timestamp: now.UTC().Format(time.RFC3339),
		Data:      devlocal.DemoObject{Object: "invoice", ID: "in_" + devlocal.RandomHex(6), Amount: 4200, Currency: "eur"},
	})
	if err != nil {
		return fmt.Errorf("encoding the event: %w", err)
	}
	sig, err := wh.Sign(*id, now, body)
	if err != nil {
		return fmt.Errorf("signing the event: %w", err)
	}

	fmt.Fprintf(stdout, "posting event %s (%s) to %s, %d time(s), signed once\n", *id, *typ, *url, *times)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	var failed int
	for i := 1; i <= *times; i++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, *url, bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("building the request: %w", err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(standardwebhooks.HeaderWebhookID, *id)
		req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
		req.Header.Set(standardwebhooks.HeaderWebhookSignature, sig)
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("ingest is not reachable at %s (%w); start the system first with `make run`", *url, err)
		}
		answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		fmt.Fprintf(stdout, "%d/%d %d %s\n", i, *times, resp.StatusCode, bytes.TrimSpace(answer))
		if resp.StatusCode >= 300 {
			failed++
			if resp.StatusCode == http.StatusUnauthorized {
				fmt.Fprintln(stdout, "  the signature was rejected: `make run` and this command must see the same DEMO_WEBHOOK_SECRET (both use the local demo secret when it is unset)")
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d posts were not accepted", failed, *times)
	}
	fmt.Fprintf(stdout, "however many times it was posted, the receiver in `make run` should print one new effect for %s\n", *id)
	return nil
}
