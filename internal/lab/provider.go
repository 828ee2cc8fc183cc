package lab

import (
	"bytes"
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

// The lab provider's retry schedule: a failed delivery (no answer, or not
// 2xx) is sent again after labRetryDelay, at most labMaxTries times in all.
// Ten seconds of retries outlast the designs' lease, so their recovery gets
// its chance, as it would with a real provider's hours of retries.
const (
	labRetryDelay = 200 * time.Millisecond
	labMaxTries   = 50
)

// labEvent is one signed event, sent byte for byte the same by every copy
// and every retry, as a provider resends a delivery.
type labEvent struct {
	id        string
	body      []byte
	signature string
	at        time.Time
}

// labProvider sends events as a webhook provider does: signed Standard
// Webhooks requests, retried until one is acknowledged with a 2xx.
type labProvider struct {
	wh     *standardwebhooks.Webhook
	client *http.Client
}

func newLabProvider(secret string) (*labProvider, error) {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return nil, fmt.Errorf("the lab's signing secret: %w", err)
	}
	return &labProvider{wh: wh, client: &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}, nil
}

// newEvent makes and signs a new event for a scenario.
func (p *labProvider) newEvent(scenario string) (labEvent, error) {
	id := "evt_lab_" + scenario + "_" + devlocal.RandomHex(6)
	now := time.Now()
	body, err := json.Marshal(devlocal.DemoEvent{
		ID: id, Type: "invoice.paid", Timestamp: now.UTC().Format(time.RFC3339),
		Data: devlocal.DemoObject{Object: "invoice", ID: "in_" + devlocal.RandomHex(6), Amount: 4200, Currency: "eur"},
	})
	if err != nil {
		return labEvent{}, err
	}
	sig, err := p.wh.Sign(id, now, body)
	if err != nil {
		return labEvent{}, err
	}
	return labEvent{id: id, body: body, signature: sig, at: now}, nil
}

// labSent is what became of one copy of an event, as its sender saw it.
type labSent struct {
	acked bool // some try was answered 2xx, and the answer arrived
	tries int
}

// deliver sends ev to url until a try is acknowledged, or labMaxTries have
// failed. With loseAck, the first acknowledgement is lost on its way back:
// the receiver answered 2xx, but the sender counts the try as failed and
// retries, as after a timeout or a reset connection.
func (p *labProvider) deliver(ctx context.Context, url string, ev labEvent, loseAck bool) labSent {
	var s labSent
	for s.tries < labMaxTries {
		s.tries++
		if code, err := p.post(ctx, url, ev); err == nil && code/100 == 2 {
			if !loseAck {
				s.acked = true
				return s
			}
			loseAck = false
		}
		select {
		case <-ctx.Done():
			return s
		case <-time.After(labRetryDelay):
		}
	}
	return s
}

func (p *labProvider) post(ctx context.Context, url string, ev labEvent) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(ev.body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(standardwebhooks.HeaderWebhookID, ev.id)
	req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(ev.at.Unix(), 10))
	req.Header.Set(standardwebhooks.HeaderWebhookSignature, ev.signature)
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	return resp.StatusCode, nil
}
