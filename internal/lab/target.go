package lab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hookgate/hookgate/internal/devlocal"
)

// labStopGrace is how long a lab process may take to stop after SIGTERM.
const labStopGrace = 10 * time.Second

// designTarget is one of designs 1–4, run as a child process of its own:
// devtool's hidden lab-design command, so that a crash is a real SIGKILL of
// the process that holds the claim.
type designTarget struct {
	l       *labRun
	name    string
	addr    string
	p       *devlocal.Proc
	records labHandler // reads the design's table, in the lab's process
}

// designTargetFor returns how to start the named design.
func (l *labRun) designTargetFor(name string) func(context.Context) (labTarget, error) {
	return func(ctx context.Context) (labTarget, error) {
		records, err := newLabHandler(name, labDesignDeps{db: l.db})
		if err != nil {
			return nil, err
		}
		addr := devlocal.FreeLoopback()
		if addr == "" {
			return nil, errors.New("no free loopback port")
		}
		t := &designTarget{l: l, name: name, addr: addr, records: records}
		return t, t.start(ctx)
	}
}

func (t *designTarget) start(ctx context.Context) error {
	args := []string{DesignCommand, "--design", t.name, "--listen", t.addr, "--downstream", t.l.downURL + "/effect/" + t.name}
	env := append(append([]string{}, t.l.selfEnv...), "DATABASE_URL="+t.l.dbURL)
	p, err := devlocal.StartProc(t.l.logs, t.name, t.l.self, args, env)
	if err != nil {
		return err
	}
	t.p = p
	return labWaitHealthy(ctx, p, "http://"+t.addr+"/healthz")
}

func (t *designTarget) url() string { return "http://" + t.addr + "/webhooks/lab" }

func (t *designTarget) crash() error { return t.p.Kill() }

func (t *designTarget) restart(ctx context.Context) error { return t.start(ctx) }

// settle has nothing to wait for: the design's recovery is the provider's
// retries, which have ended.
func (t *designTarget) settle(ctx context.Context, eventID string) (bool, bool, error) {
	return t.records.record(ctx, eventID)
}

func (t *designTarget) close() error {
	if t.p == nil {
		return nil
	}
	err := t.p.Stop(labStopGrace)
	t.p = nil
	return err
}

// labWaitHealthy polls url until it answers 200, failing early when p exits.
func labWaitHealthy(ctx context.Context, p *devlocal.Proc, url string) error {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(devlocal.HealthTimeout)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if p.Exited() {
			return fmt.Errorf("%s exited while starting (%s; see the lab's process log)", p.Name(), p.ExitText())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer %s within %s", p.Name(), url, devlocal.HealthTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
