package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/devlocal"
)

// labProviderName is the provider the lab's hookgate config serves, at
// POST /webhooks/lab.
const labProviderName = "lab"

// labRescueAfter is the lab worker's rescue_after: the shortest River and
// the config accept for the lab route's 2s timeout, so that a crashed
// worker's job is taken back within seconds rather than the default 10m.
const labRescueAfter = "4s"

// hookgateConfig is the lab's hookgate config: one Standard Webhooks
// provider, one route to the lab downstream, a short rescue_after.
func hookgateConfig(downURL string) string {
	return fmt.Sprintf(`# Written by devtool lab.
worker:
  concurrency: 8
  rescue_after: %s
  shutdown_timeout: 2s
providers:
  - name: %s
    scheme: standard-webhooks
    secrets_env: [LAB_WEBHOOK_SECRET]
    replay_guard: off
routes:
  - name: lab
    provider: %s
    events: ["*"]
    url: %s/effect/hookgate
    timeout: 2s
    max_attempts: 5
    backoff: { initial: 100ms, max: 1s }
`, labRescueAfter, labProviderName, labProviderName, downURL)
}

// hookgateTarget is design 5: the real ingest and worker binaries. A crash
// kills the worker, which holds the trapped call; ingest stays up, as it
// had answered the provider long before.
type hookgateTarget struct {
	l                      *labRun
	env                    []string
	ingestAddr, workerAddr string
	ingest, worker         *devlocal.Proc
	store                  *claim.Store
}

// hookgateTargetFor returns how to start hookgate for the lab.
func (l *labRun) hookgateTargetFor() func(context.Context) (labTarget, error) {
	return func(ctx context.Context) (labTarget, error) {
		cfgPath := filepath.Join(l.workDir, "hookgate.yaml")
		if err := os.WriteFile(cfgPath, []byte(hookgateConfig(l.downURL)), 0o600); err != nil {
			return nil, err
		}
		t := &hookgateTarget{
			l:     l,
			env:   []string{"PATH=" + os.Getenv("PATH"), "DATABASE_URL=" + l.dbURL, "HOOKGATE_CONFIG=" + cfgPath, "HOOKGATE_LOG_FORMAT=text", "LAB_WEBHOOK_SECRET=" + l.secret},
			store: claim.NewStore(l.db, nil, nil),
		}
		var err error
		if t.ingest, t.ingestAddr, err = t.launch(ctx, "ingest", l.ingestBin); err != nil {
			return t, err
		}
		t.worker, t.workerAddr, err = t.launch(ctx, "worker", l.workerBin)
		return t, err
	}
}

// launch starts bin on a free loopback port and waits until it is healthy.
func (t *hookgateTarget) launch(ctx context.Context, name, bin string) (*devlocal.Proc, string, error) {
	addr := devlocal.FreeLoopback()
	if addr == "" {
		return nil, "", errors.New("no free loopback port")
	}
	p, err := devlocal.StartProc(t.l.logs, name, bin, []string{"--listen", addr}, t.env)
	if err != nil {
		return nil, "", err
	}
	return p, addr, labWaitHealthy(ctx, p, "http://"+addr+"/healthz")
}

func (t *hookgateTarget) url() string {
	return "http://" + t.ingestAddr + "/webhooks/" + labProviderName
}

func (t *hookgateTarget) crash() error { return t.worker.Kill() }

// restart starts a new worker. It becomes River's leader once the killed
// one's leadership expires (up to about 15s), and its rescuer then makes the
// killed worker's job retryable, that job having run longer than
// rescue_after.
func (t *hookgateTarget) restart(ctx context.Context) error {
	var err error
	t.worker, t.workerAddr, err = t.launch(ctx, "worker", t.l.workerBin)
	return err
}

// settle waits until the event's claim is completed or failed, for at most
// labWait: hookgate's recovery has had its chance by then, and a claim
// still unfinished is measured as such (lost, when nothing was effected).
func (t *hookgateTarget) settle(ctx context.Context, eventID string) (claimed, completed bool, err error) {
	deadline := time.Now().Add(labWait)
	for {
		rec, _, err := t.store.Get(ctx, labProviderName, eventID)
		switch {
		case errors.Is(err, claim.ErrNotFound):
			return false, false, nil
		case err != nil:
			return false, false, err
		case rec.Status == claim.Completed || rec.Status == claim.Failed:
			return true, rec.Status == claim.Completed, nil
		case time.Now().After(deadline):
			return true, false, nil
		}
		select {
		case <-ctx.Done():
			return true, false, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (t *hookgateTarget) close() error {
	var errs []error
	for _, p := range []*devlocal.Proc{t.worker, t.ingest} {
		if p != nil {
			errs = append(errs, p.Stop(labStopGrace))
		}
	}
	t.worker, t.ingest = nil, nil
	return errors.Join(errs...)
}
