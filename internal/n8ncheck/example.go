package n8ncheck

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/hookgate/hookgate/internal/claim"
)

// workedExample runs docs/n8n.md's worked example: a checkout event sent
// twice, the shipment and label calls, and the notify-ops workflow behind
// Header Auth. It keeps `worker claims show`'s output for the report.
func (c *n8nChecker) workedExample(ctx context.Context) ([]n8nRow, error) {
	const id = "evt_1QcheckWorkedExample"
	session := map[string]any{
		"id": "cs_check_1042", "object": "checkout.session", "amount_total": 4200, "currency": "eur",
		"metadata":         map[string]string{"ship": "true", "order_id": "ord_1042"},
		"customer_details": map[string]any{"email": "ada@example.com"},
		"shipping_details": map[string]any{"name": "Ada Lovelace", "address": map[string]string{
			"line1": "12 St James's Square", "city": "London", "postal_code": "SW1Y 4JH", "country": "GB"}},
	}
	_, dup1, err := c.send(ctx, id, "checkout.session.completed", session)
	if err != nil {
		return nil, err
	}
	_, dup2, err := c.send(ctx, id, "checkout.session.completed", session) // Stripe's retry
	if err != nil {
		return nil, err
	}
	cl, ds, err := c.settled(ctx, id)
	if err != nil {
		return nil, err
	}
	ex, err := c.executions(ctx, wfID("checkout-paid"))
	if err != nil {
		return nil, err
	}
	ship, label, notify := ds["create-shipment"], ds["buy-label"], ds["notify-ops"]
	shipCalls, shipEffects := c.rec.stats("v1/shipments")
	labelCalls, labelEffects := c.rec.stats(labelPath)
	_, notifyEffects := c.rec.stats("effect/checkout-paid")
	key, body := c.rec.last("effect/checkout-paid")
	var told struct {
		Email    string `json:"email"`
		Order    string `json:"order"`
		Tracking string `json:"tracking"`
	}
	_ = json.Unmarshal(body, &told)
	wantKey := claim.Key{Provider: "stripe", EventID: id, Route: "notify-ops"}.IdempotencyKey()

	forged, err := c.forgedToken(ctx)
	if err != nil {
		return nil, err
	}
	out, err := c.worker(ctx, "claims", "show", "stripe", id)
	if err != nil {
		return nil, fmt.Errorf("worker claims show: %w: %s", err, out)
	}
	c.claimsShow = string(out)
	return []n8nRow{
		{
			scenario: "worked example: checkout sent twice, shipping API answers 503 then 201",
			hookgate: fmt.Sprintf("second copy duplicate: %t; create-shipment %s after %d attempts, result %s",
				!dup1 && dup2, ship.Status, ship.AttemptCount, string(ship.Result)),
			executions: "—", effects: fmt.Sprintf("%d shipment (of %d calls)", shipEffects, shipCalls),
			verdict: okIf(!dup1 && dup2 && cl.Status == claim.Completed && ship.AttemptCount == 2 &&
				string(ship.Result) == `{"id": "shp_8812"}` && shipEffects == 1),
		},
		{
			scenario:   "worked example: buy-label after create-shipment, the shipment id in its path",
			hookgate:   fmt.Sprintf("buy-label %s after %d attempt(s), result %s", label.Status, label.AttemptCount, string(label.Result)),
			executions: "—", effects: fmt.Sprintf("%d label (of %d calls)", labelEffects, labelCalls),
			verdict: okIf(label.Status == claim.DeliveryCompleted && labelEffects == 1 && labelCalls == 1 &&
				string(label.Result) == `{"tracking": "`+trackingNumber+`"}`),
		},
		{
			scenario: "worked example: notify-ops to the Header Auth workflow",
			hookgate: fmt.Sprintf("%s after %d attempt(s); the workflow saw the key: %t, email %q, tracking %q",
				notify.Status, notify.AttemptCount, key == wantKey, told.Email, told.Tracking),
			executions: describeExecutions(ex), effects: strconv.Itoa(notifyEffects),
			verdict: okIf(notify.Status == claim.DeliveryCompleted && total(ex) == 1 && ex["success"] == 1 && notifyEffects == 1 &&
				key == wantKey && told.Email == "ada@example.com" && told.Order == "ord_1042" && told.Tracking == trackingNumber),
		},
		{
			scenario: "a wrong X-Hookgate-Token, sent to the workflow directly",
			hookgate: fmt.Sprintf("n8n answered %d", forged), executions: "—", effects: "—",
			verdict: okIf(forged == http.StatusForbidden),
		},
	}, nil
}

// forgedToken posts to the worked example's workflow with a wrong token
// and returns n8n's status.
func (c *n8nChecker) forgedToken(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.n8n.base+"/webhook/checkout-paid", strings.NewReader(`{}`))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Hookgate-Token", "not-"+c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
