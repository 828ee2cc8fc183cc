package deliver

import (
	"encoding/json"
	"errors"
	"strconv"

	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/sanitize"
)

// redactorOf is o.Redactor, or, when none is given, one of the secrets the
// worker itself sends: its signing secrets and secret header values.
func redactorOf(o Options) *sanitize.Redactor {
	if o.Redactor != nil {
		return o.Redactor
	}
	return sanitize.NewRedactor(config.Secrets{Route: o.SigningSecrets, Headers: o.SecretHeaders}.Values()...)
}

// redactHead redacts the first bytes read of a response body, which a
// downstream may have filled with the credentials it was sent ("invalid
// credentials Bearer sk_live_…"). It runs before the snippet is cut from
// head; a head that filled its buffer may have cut a secret short, and the
// stub is redacted too.
func (w *Worker) redactHead(head []byte) []byte {
	return w.redact.Head(head, len(head) >= snippetBytes)
}

// redactResult redacts what o says about an attempt before it is stored,
// logged or handed to River as the job's error, and the result it records
// (a result program over an answer that echoes a credential would store it).
// A result that redaction would leave invalid JSON is stored as the marker.
func (w *Worker) redactResult(o *callResult) {
	o.reason = w.redact.String(o.reason)
	if o.resultErr != nil {
		o.resultErr = errors.New(w.redact.String(o.resultErr.Error()))
	}
	if o.result != nil {
		if red := w.redact.String(string(o.result)); red != string(o.result) {
			if !json.Valid([]byte(red)) {
				red = strconv.Quote(sanitize.Redacted)
			}
			o.result = []byte(red)
		}
	}
}
