package n8ncheck

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/hookgate/hookgate/internal/devlocal"
)

// n8nProc is n8n, started and stopped by the check.
type n8nProc struct {
	con, logs *devlocal.Console
	bin, base string
	env       []string
	logPath   string
	p         *devlocal.Proc
}

// startup is what n8n answered between taking its first connection and
// serving its webhooks.
type startup struct {
	// startingUp counts 200 "n8n is starting up. Please wait" answers,
	// given to any request before n8n has checked its database.
	startingUp int
	// notFound counts 404s, given until a workflow's webhook is registered.
	notFound int
	// window is how long n8n answered before it served the probe's webhook.
	window time.Duration
}

// String is how the check reports n8n's start-up.
func (s startup) String() string {
	return fmt.Sprintf("answered for %s before serving webhooks: %d× 200 \"starting up\", %d× 404",
		s.window.Round(100*time.Millisecond), s.startingUp, s.notFound)
}

// launch starts n8n.
func (n *n8nProc) launch() error {
	n.con.Printf("n8n-check", "starting n8n on %s", n.base)
	p, err := devlocal.StartProc(n.logs, "n8n", n.bin, []string{"start"}, n.env)
	if err != nil {
		return err
	}
	n.p = p
	return nil
}

// start starts n8n and waits until it serves its webhooks.
func (n *n8nProc) start(ctx context.Context) (startup, error) {
	if err := n.launch(); err != nil {
		return startup{}, err
	}
	return n.waitWebhooks(ctx)
}

// get polls path until ok accepts the answer, for at most n8nCheckTimeout,
// failing early should n8n exit. seen is told of every answer.
func (n *n8nProc) get(ctx context.Context, path string, seen func(code int, body string), ok func(code int, body string) bool) error {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(n8nCheckTimeout)
	for {
		resp, err := client.Get(n.base + path)
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			seen(resp.StatusCode, string(b))
			if ok(resp.StatusCode, string(b)) {
				return nil
			}
		}
		if n.p == nil || n.p.Exited() {
			return fmt.Errorf("n8n exited while starting (see %s)", n.logPath)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("n8n did not answer %s as expected within %s (see %s)", path, n8nCheckTimeout, n.logPath)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitWebhooks waits until n8n runs the probe workflow: its production
// webhooks are registered.
func (n *n8nProc) waitWebhooks(ctx context.Context) (startup, error) {
	var (
		st    startup
		first time.Time
	)
	err := n.get(ctx, "/webhook/hg-probe", func(code int, body string) {
		if first.IsZero() {
			first = time.Now()
		}
		switch {
		case code == http.StatusOK && strings.Contains(body, "starting up"):
			st.startingUp++
		case code == http.StatusNotFound:
			st.notFound++
		}
	}, func(code int, body string) bool {
		return code == http.StatusOK && strings.Contains(body, "Workflow was started")
	})
	if err != nil {
		return st, err
	}
	st.window = time.Since(first)
	n.con.Printf("n8n-check", "n8n serves its webhooks; it %s", st)
	return st, nil
}

// stop stops n8n if it runs.
func (n *n8nProc) stop() error {
	if n.p == nil {
		return nil
	}
	n.con.Printf("n8n-check", "stopping n8n")
	err := n.p.Stop(30 * time.Second)
	n.p = nil
	return err
}
