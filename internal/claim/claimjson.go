package claim

import (
	"encoding/json"
	"time"
)

// DeliveryView is one delivery as it is presented: by `worker claims show`
// and `worker claims export`, and by the operator API and console; Export's
// query builds its deliveries in this shape too. It is the one JSON shape
// of a delivery, so that the field names and their order cannot drift.
type DeliveryView struct {
	Route          string         `json:"route"`
	Status         DeliveryStatus `json:"status"`
	AttemptCount   int            `json:"attempt_count"`
	MaxAttempts    int            `json:"max_attempts,omitempty"`
	LastError      string         `json:"last_error,omitempty"`
	IdempotencyKey string         `json:"idempotency_key"`
	UpdatedAt      time.Time      `json:"updated_at"`
	CompletedAt    *time.Time     `json:"completed_at,omitempty"`
	// BusinessKey is the route's business key this delivery holds.
	BusinessKey string `json:"business_key,omitempty"`
	// Result is what the route's result program recorded at completion.
	Result json.RawMessage `json:"result,omitempty"`
	// Attempts is the delivery's attempt history, without responses
	// (the console adds them for operators). It is nil, and absent from
	// the JSON, where a presentation leaves the history out, as the API's
	// claim list does; see SetAttempts.
	Attempts *[]AttemptRecord `json:"attempts,omitempty"`
	// After names the routes that run before this one, for this event.
	After []string `json:"after,omitempty"`
}

// View is a claim with its deliveries, as `worker claims show` and the
// operator API present it.
type View struct {
	Record
	Deliveries []DeliveryView `json:"deliveries"`
}

// AppendDeliveryViews appends the view of each of ds to dst and returns
// it, so that a caller presenting many claims can reuse one slice.
// maxAttempts gives a route's configured max_attempts, 0 once the route is
// no longer configured (the view then omits it). The attempt history is
// left out: each presentation reads it its own way (see SetAttempts).
func AppendDeliveryViews(dst []DeliveryView, ds []Delivery, maxAttempts func(route string) int) []DeliveryView {
	for _, d := range ds {
		dst = append(dst, DeliveryView{
			Route: d.Route, Status: d.Status, AttemptCount: d.AttemptCount, MaxAttempts: maxAttempts(d.Route),
			LastError: d.LastError, IdempotencyKey: d.Key().IdempotencyKey(),
			UpdatedAt: d.UpdatedAt, CompletedAt: d.CompletedAt, BusinessKey: d.BusinessKey, Result: d.Result,
			After: d.After,
		})
	}
	return dst
}

// SetAttempts sets v's attempt history to as, an empty one when as is nil,
// so that the JSON shows [] rather than null or nothing.
func (v *DeliveryView) SetAttempts(as []AttemptRecord) {
	if as == nil {
		as = []AttemptRecord{}
	}
	v.Attempts = &as
}
