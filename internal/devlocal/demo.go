package devlocal

// DemoEvent is a Standard Webhooks payload (type, timestamp, data) that also
// carries its id, as many senders' payloads do.
type DemoEvent struct {
	ID        string     `json:"id"`
	Type      string     `json:"type"`
	Timestamp string     `json:"timestamp"`
	Data      DemoObject `json:"data"`
}

// DemoObject is the invoice the demo event is about.
type DemoObject struct {
	Object   string `json:"object"`
	ID       string `json:"id"`
	Amount   int    `json:"amount"`
	Currency string `json:"currency"`
}
