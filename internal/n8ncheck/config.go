package n8ncheck

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/devlocal"
)

// n8nEnvironment is n8n's environment: Postgres at dbURL, its files in
// home, its server on addr and its task broker (should runners be on) on
// brokerAddr, loopback only, nothing sent home.
func n8nEnvironment(dbURL, home, addr, brokerAddr string) ([]string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return nil, errors.New("the database URL is not a URL")
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "5432"
	}
	_, n8nPort, _ := net.SplitHostPort(addr)
	_, brokerPort, _ := net.SplitHostPort(brokerAddr)
	pass, _ := u.User.Password()
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"DB_TYPE=postgresdb",
		"DB_POSTGRESDB_HOST=" + host,
		"DB_POSTGRESDB_PORT=" + port,
		"DB_POSTGRESDB_DATABASE=" + strings.TrimPrefix(u.Path, "/"),
		"DB_POSTGRESDB_USER=" + u.User.Username(),
		"DB_POSTGRESDB_PASSWORD=" + pass,
		"N8N_USER_FOLDER=" + home,
		"N8N_LISTEN_ADDRESS=127.0.0.1",
		"N8N_HOST=127.0.0.1",
		"N8N_PORT=" + n8nPort,
		"N8N_PROTOCOL=http",
		"N8N_RUNNERS_BROKER_LISTEN_ADDRESS=127.0.0.1",
		"N8N_RUNNERS_BROKER_PORT=" + brokerPort,
		// The default engine needs an isolate built by an install script,
		// which --ignore-scripts skips.
		"N8N_EXPRESSION_ENGINE=legacy",
		"N8N_ENCRYPTION_KEY=" + devlocal.RandomHex(24),
		"N8N_ENFORCE_SETTINGS_FILE_PERMISSIONS=true",
		"N8N_DIAGNOSTICS_ENABLED=false",
		"N8N_VERSION_NOTIFICATIONS_ENABLED=false",
		"N8N_TEMPLATES_ENABLED=false",
		"N8N_PERSONALIZATION_ENABLED=false",
		"N8N_PUBLIC_API_DISABLED=true",
		"N8N_GRACEFUL_SHUTDOWN_TIMEOUT=10",
		"EXECUTIONS_DATA_SAVE_ON_SUCCESS=all",
		"EXECUTIONS_DATA_SAVE_ON_ERROR=all",
	}
	return env, nil
}

// n8nCheckConfig is the check's hookgate config: the first yaml block of
// the guide (its worked example) with its addresses made local, and the
// check's own routes after it.
func n8nCheckConfig(guide []byte, ingestAddr, workerAddr, apiURL, n8nBase string) ([]byte, error) {
	_, rest, ok := bytes.Cut(guide, []byte("```yaml\n"))
	if !ok {
		return nil, errors.New("the guide has no yaml block")
	}
	block, _, ok := bytes.Cut(rest, []byte("```"))
	if !ok {
		return nil, errors.New("the guide's yaml block does not end")
	}
	s := string(block)
	for _, r := range []struct {
		re   *regexp.Regexp
		with string
	}{
		{regexp.MustCompile(`(?m)^(ingest:\n  listen: )"[^"]*"`), `${1}"` + ingestAddr + `"`},
		{regexp.MustCompile(`(?m)^(worker:\n  listen: )"[^"]*"`), `${1}"` + workerAddr + `"`},
		{regexp.MustCompile(`https://api\.shipper\.example`), apiURL},
		{regexp.MustCompile(`https://n8n\.example\.com`), n8nBase},
	} {
		if !r.re.MatchString(s) {
			return nil, fmt.Errorf("the guide's worked example no longer has %s", r.re)
		}
		s = r.re.ReplaceAllString(s, r.with)
	}
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	var b strings.Builder
	b.WriteString(s)
	route := func(name, event, path string, timeout string, attempts int, retry404 bool, extra ...string) {
		fmt.Fprintf(&b, "  - name: %s\n    provider: stripe\n    events: [%q]\n    url: %s/webhook/%s\n    timeout: %s\n    max_attempts: %d\n    backoff: {initial: 1s, max: 2s}\n",
			name, event, n8nBase, path, timeout, attempts)
		if retry404 {
			b.WriteString("    retry_statuses: [404]\n")
		}
		// Each check route shows what happens to each delivery on its
		// own, so its circuit breaker is off: an n8n stopped for the
		// restart scenarios would open it.
		b.WriteString("    breaker: off\n")
		for _, e := range extra {
			b.WriteString("    " + e + "\n")
		}
	}
	b.WriteString("\n  # The check's routes.\n")
	route("check-duplicates", "check.duplicates", "hg-duplicates", "30s", 10, true)
	route("check-failing", "check.failing", "hg-failing", "30s", 10, true)
	route("check-respond-node", "check.respond-node", "hg-respond-node", "30s", 10, true)
	route("check-slow-short", "check.slow", "hg-slow-short", "3s", 3, true)
	route("check-slow-long", "check.slow", "hg-slow-long", "15s", 3, true)
	route("check-restart", "check.restart", "hg-restart", "30s", 40, true)
	route("check-restart-plain", "check.restart", "hg-restart-plain", "30s", 40, false)
	route("check-restart-paused", "check.restart-paused", "hg-restart-paused", "30s", 40, true)
	// docs/n8n.md's recommended setting.
	route("check-restart-success", "check.restart", "hg-restart-success", "30s", 40, true, n8nSuccess)
	route("check-respond-success", "check.respond-success", "hg-respond-success", "30s", 10, true, n8nSuccess)
	return []byte(b.String()), nil
}

// n8nSuccess is the success setting docs/n8n.md recommends.
const n8nSuccess = `success: '.body.ok == true'`

// serveAPIs picks the loopback addresses the check runs on, and serves the
// recorder: the APIs the check's workflows and the worked example call.
func (r *n8nCheckRun) serveAPIs() error {
	// Loopback addresses, picked free now.
	r.ingestAddr, r.workerAddr, r.n8nAddr, r.brokerAddr = devlocal.FreeLoopback(), devlocal.FreeLoopback(), devlocal.FreeLoopback(), devlocal.FreeLoopback()
	for _, a := range []string{r.ingestAddr, r.workerAddr, r.n8nAddr, r.brokerAddr} {
		if a == "" {
			return errors.New("no free loopback port")
		}
	}
	r.rec = newRecorder()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listening for the check's APIs: %w", err)
	}
	apiSrv := &http.Server{Handler: r.rec, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = apiSrv.Serve(ln) }()
	r.onExit(func(err error) error {
		apiSrv.Close()
		return err
	})
	r.apiAddr = ln.Addr()
	r.apiURL = "http://" + ln.Addr().String()
	r.n8nBase = "http://" + r.n8nAddr
	return nil
}

// writeConfig makes the check's secrets and writes its hookgate config,
// once it parses, into the working directory.
func (r *n8nCheckRun) writeConfig() error {
	r.secrets = map[string]string{
		"STRIPE_WEBHOOK_SECRET": "whsec_" + devlocal.RandomHex(16),
		"SHIPPER_AUTHORIZATION": "Bearer sk_check_" + devlocal.RandomHex(8),
		"N8N_WEBHOOK_TOKEN":     devlocal.RandomHex(16),
	}
	r.rec.shipperAuth, r.rec.log = r.secrets["SHIPPER_AUTHORIZATION"], r.logs
	cfgYAML, err := n8nCheckConfig(r.guide, r.ingestAddr, r.workerAddr, r.apiURL, r.n8nBase)
	if err != nil {
		return err
	}
	if _, err := config.Parse(cfgYAML); err != nil {
		return fmt.Errorf("the check's config (the guide's worked example and the check's routes): %w", err)
	}
	r.cfgPath = filepath.Join(r.work, "hookgate.yaml")
	if err := os.WriteFile(r.cfgPath, cfgYAML, 0o600); err != nil {
		return err
	}
	return nil
}
