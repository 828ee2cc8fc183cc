package bench

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
)

// postStripe sends one Stripe-signed webhook to url with client and drains
// the answer, so that its connection is reused; anything but 200 is an error.
func postStripe(client *http.Client, url string, body []byte, signature string) error {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Stripe-Signature", signature)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}
