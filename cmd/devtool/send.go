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
// answer every other as a duplicate. With --fail N it first makes the demo
// receiver answer 503 for --fail-for, then sends N events so, each posted
// --times times: the demo route retries them, its circuit opens, probes and
// closes once the receiver answers again, and events whose attempts all
// met the 503s end failed, ready for a retry from the console.
func send(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := devlocal.NewFlagSet("send", "send [--url URL] [--times N] [--id ID] [--type TYPE] [--fail N [--fail-for D] [--receiver URL]]", stderr)
	url := fs.String("url", "http://127.0.0.1:8080/webhooks/demo", "ingest endpoint of a standard-webhooks provider")
	times := fs.Int("times", 2, "how many times to post the same signed event")
	id := fs.String("id", "", "event id (webhook-id); default evt_ and random hex")
	typ := fs.String("type", "invoice.paid", "event type")
	fail := fs.Int("fail", 0, "make the demo receiver fail for --fail-for, then send this many events (each its own id)")
	failFor := fs.Duration("fail-for", 90*time.Second, "with --fail: how long the demo receiver answers 503")
	receiverURL := fs.String("receiver", "http://"+receiverAddr, "with --fail: the demo receiver `make run` started")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("send takes no arguments, got %q", fs.Args())
	}
	if *times < 1 {
		return fmt.Errorf("--times must be at least 1, got %d", *times)
	}
	if *fail < 0 || *fail > 100 {
		return fmt.Errorf("--fail must be from 1 to 100 events, got %d", *fail)
	}
	if *fail > 0 && *id != "" {
		return fmt.Errorf("--id names one event; --fail sends %d, each with an id of its own", *fail)
	}
	// The secret `devtool run` gives ingest when DEMO_WEBHOOK_SECRET is unset.
	wh, err := standardwebhooks.NewWebhook(cmp.Or(getenv("DEMO_WEBHOOK_SECRET"), demoWebhookSecret))
	if err != nil {
		return fmt.Errorf("DEMO_WEBHOOK_SECRET is not whsec_ followed by base64: %w", err)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	if *fail == 0 {
		if *id == "" {
			*id = "evt_" + devlocal.RandomHex(8)
		}
		if err := postEvent(ctx, client, wh, *url, *id, *typ, *times, stdout); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "however many times it was posted, the receiver in `make run` should print one new effect for %s\n", *id)
		return nil
	}
	until, err := failReceiver(ctx, client, *receiverURL, *failFor)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "the demo receiver answers 503 until %s\n", until)
	for range *fail {
		if err := postEvent(ctx, client, wh, *url, "evt_"+devlocal.RandomHex(8), *typ, *times, stdout); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "%s", failStory)
	return nil
}

// failStory tells what `send --fail` sets going, and where to watch it.
const failStory = `now watch http://127.0.0.1:9091/console/ (README, "The console"):
  - the demo route retries (Hookgate-Attempt 1, 2, …; the receiver prints each 503);
  - after 3 failures in a row its circuit opens: the routes page says when and why,
    and counts the deliveries it holds (they spend no attempt while held);
  - a probe every cool-down; the first that is answered 200 closes the circuit and
    the held deliveries go out at once;
  - an event whose 5 attempts all met the 503s ends failed: retry it from the
    claims list (status failed, "Retry every match"), or stop the failing early
    with: curl -X DELETE http://127.0.0.1:9099/demo/fail
`

// failReceiver asks the demo receiver to answer 503 for d and returns
// until when it will.
func failReceiver(ctx context.Context, client *http.Client, receiverURL string, d time.Duration) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, receiverURL+"/demo/fail?for="+d.String(), nil)
	if err != nil {
		return "", fmt.Errorf("building the request to the demo receiver: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("the demo receiver is not reachable at %s (%w); start the system first with `make run`", receiverURL, err)
	}
	defer resp.Body.Close()
	var answer struct {
		Until string `json:"failing_until"`
		Error string `json:"error"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<10)).Decode(&answer); err != nil || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("the demo receiver refused to fail (HTTP %d): %s", resp.StatusCode, cmp.Or(answer.Error, "no reason given"))
	}
	return answer.Until, nil
}

// postEvent builds one demo event, signs it once and posts it times times.
func postEvent(ctx context.Context, client *http.Client, wh *standardwebhooks.Webhook, url, id, typ string, times int, stdout io.Writer) error {
	now := time.Now()
	body, err := json.Marshal(devlocal.DemoEvent{
		ID:        id,
		Type:      typ,
		Timestamp: now.UTC().Format(time.RFC3339),
		Data:      devlocal.DemoObject{Object: "invoice", ID: "in_" + devlocal.RandomHex(6), Amount: 4200, Currency: "eur"},
	})
	if err != nil {
		return fmt.Errorf("encoding the event: %w", err)
	}
	sig, err := wh.Sign(id, now, body)
	if err != nil {
		return fmt.Errorf("signing the event: %w", err)
	}

	fmt.Fprintf(stdout, "posting event %s (%s) to %s, %d time(s), signed once\n", id, typ, url, times)
	var failed int
	for i := 1; i <= times; i++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("building the request: %w", err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(standardwebhooks.HeaderWebhookID, id)
		req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
		req.Header.Set(standardwebhooks.HeaderWebhookSignature, sig)
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("ingest is not reachable at %s (%w); start the system first with `make run`", url, err)
		}
		answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		fmt.Fprintf(stdout, "%d/%d %d %s\n", i, times, resp.StatusCode, bytes.TrimSpace(answer))
		if resp.StatusCode >= 300 {
			failed++
			if resp.StatusCode == http.StatusUnauthorized {
				fmt.Fprintln(stdout, "  the signature was rejected: `make run` and this command must see the same DEMO_WEBHOOK_SECRET (both use the local demo secret when it is unset)")
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d posts were not accepted", failed, times)
	}
	return nil
}
