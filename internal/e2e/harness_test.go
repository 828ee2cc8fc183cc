package e2e_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/proctest"
	"github.com/hookgate/hookgate/internal/testfactory"
)

// Binaries built once by TestMain.
var bins struct{ ingest, worker string }

// TestMain builds the binaries under test into a directory of this test
// process's own, so that concurrent runs from other checkouts never exec each
// other's builds, then runs the tests and removes the directory.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hookgate-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	if err := build(dir, "ingest", "worker"); err != nil {
		_ = os.RemoveAll(dir)
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	bins.ingest, bins.worker = filepath.Join(dir, "ingest"), filepath.Join(dir, "worker")
	dbtest.Main(m, func() { _ = os.RemoveAll(dir) })
}

// build compiles the commands names into dir, in one go build so that
// they compile and link in parallel.
func build(dir string, names ...string) error {
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, n := range names {
		args = append(args, "github.com/hookgate/hookgate/cmd/"+n)
	}
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("building %v: %v\n%s", names, err, out)
	}
	return nil
}

// Secrets of the test provider and of signed routes: whsec_ + base64.
var (
	providerSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("e2e provider key, 32 bytes long!"))
	routeSecret    = "whsec_" + base64.StdEncoding.EncodeToString([]byte("e2e route signing key, 32 bytes"))
)

// provider is the name of the test's Standard Webhooks provider.
const provider = "sw"

// The test's GitHub and Shopify providers, whose signatures cover only the
// body; their secrets are githubSecret and shopifySecret.
const (
	githubProvider  = "gh"
	shopifyProvider = "shop"
	githubSecret    = "e2e github secret"
	shopifySecret   = "e2e shopify secret"
)

// route describes one route of a stack's config; its URL is the stack's
// downstream at /NAME.
type route struct {
	name        string
	events      []string
	timeout     time.Duration // default 2s
	maxAttempts int           // default 5
	initial     time.Duration // backoff; default 10ms
	max         time.Duration // backoff; default 1s
	signed      bool
	businessKey []string // business_key sources; none when nil
	concurrency int      // default worker.concurrency
	provider    string   // default provider (sw)
	url         string   // instead of the stack's downstream
	extra       string   // more YAML keys of the route, each line indented four spaces
}

// setting overrides one worker setting of a stack's config, or, with a key
// "retention.NAME", one retention setting.
type setting struct{ key, value string }

// stack is one test's system: a database of its own, a config file, a
// downstream, and the processes started on them.
type stack struct {
	t       *testing.T
	db      *dbtest.DB
	store   *claim.Store
	cfgPath string
	down    *downstream
	env     []string
}

func newStack(t *testing.T, routes []route, settings ...setting) *stack {
	t.Helper()
	db := dbtest.NewDB(t)
	down := newDownstream(t)
	s := &stack{t: t, db: db, store: claim.NewStore(db.Pool, nil, nil), down: down}

	ingest := map[string]string{"claim_timeout": "10s"}
	worker := map[string]string{
		"concurrency":        "8",
		"rescue_after":       "30s",
		"shutdown_timeout":   "3s",
		"reconcile_interval": "1m",
	}
	var retention []setting // keys "retention.NAME"
	for _, st := range settings {
		if name, ok := strings.CutPrefix(st.key, "retention."); ok {
			retention = append(retention, setting{name, st.value})
			continue
		}
		if k, ok := strings.CutPrefix(st.key, "ingest."); ok {
			ingest[k] = st.value
			continue
		}
		worker[st.key] = st.value
	}
	var b strings.Builder
	b.WriteString("ingest:\n")
	for k, v := range ingest {
		fmt.Fprintf(&b, "  %s: %s\n", k, v)
	}
	b.WriteString("worker:\n")
	for _, k := range []string{"concurrency", "rescue_after", "shutdown_timeout", "reconcile_interval"} {
		fmt.Fprintf(&b, "  %s: %s\n", k, worker[k])
	}
	if len(retention) > 0 {
		b.WriteString("retention:\n")
		for _, st := range retention {
			fmt.Fprintf(&b, "  %s: %s\n", st.key, st.value)
		}
	}
	fmt.Fprintf(&b, "providers:\n  - name: %s\n    scheme: standard-webhooks\n    secrets_env: [E2E_PROVIDER_SECRET]\n    on_failed_redelivery: reopen\n", provider)
	fmt.Fprintf(&b, "  - name: %s\n    scheme: github\n    secrets_env: [E2E_GITHUB_SECRET]\n", githubProvider)
	fmt.Fprintf(&b, "  - name: %s\n    scheme: shopify\n    secrets_env: [E2E_SHOPIFY_SECRET]\n", shopifyProvider)
	b.WriteString("routes:\n")
	for _, r := range routes {
		events, _ := json.Marshal(r.events)
		fmt.Fprintf(&b, "  - name: %s\n    provider: %s\n    events: %s\n    url: %s\n    timeout: %s\n    max_attempts: %d\n    backoff: {initial: %s, max: %s}\n",
			r.name, cmpStr(r.provider, provider), events, cmpStr(r.url, down.URL+"/"+r.name), cmpDur(r.timeout, 2*time.Second), cmpInt(r.maxAttempts, 5),
			cmpDur(r.initial, 10*time.Millisecond), cmpDur(r.max, time.Second))
		if r.businessKey != nil {
			sources, _ := json.Marshal(r.businessKey)
			fmt.Fprintf(&b, "    business_key: %s\n", sources)
		}
		if r.concurrency != 0 {
			fmt.Fprintf(&b, "    concurrency: %d\n", r.concurrency)
		}
		b.WriteString(r.extra)
		if r.signed {
			b.WriteString("    signing_secret_env: E2E_ROUTE_SECRET\n")
			down.signed(r.name)
		}
	}
	s.cfgPath = filepath.Join(t.TempDir(), "hookgate.yaml")
	require.NoError(t, os.WriteFile(s.cfgPath, []byte(b.String()), 0o600))

	// Small pools: several stacks run at once against one server.
	dbURL, err := url.Parse(db.URL)
	require.NoError(t, err)
	q := dbURL.Query()
	q.Set("pool_max_conns", "6")
	dbURL.RawQuery = q.Encode()
	s.env = []string{
		"PATH=" + os.Getenv("PATH"),
		"DATABASE_URL=" + dbURL.String(),
		"HOOKGATE_CONFIG=" + s.cfgPath,
		"HOOKGATE_LOG_FORMAT=text",
		"E2E_PROVIDER_SECRET=" + providerSecret,
		"E2E_ROUTE_SECRET=" + routeSecret,
		"E2E_GITHUB_SECRET=" + githubSecret,
		"E2E_SHOPIFY_SECRET=" + shopifySecret,
	}
	return s
}

func cmpDur(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func cmpInt(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}

// proc is a running ingest or worker.
type proc struct {
	name string
	url  string // http://127.0.0.1:PORT
	cmd  *exec.Cmd
	out  *proctest.Buffer
	done chan struct{}
}

// ingest starts an ingest process and waits until it is healthy.
func (s *stack) ingest() *proc { return s.start("ingest", bins.ingest) }

// worker starts a worker process and waits until it is healthy.
func (s *stack) worker() *proc { return s.start("worker", bins.worker) }

func (s *stack) start(name, bin string) *proc {
	t := s.t
	t.Helper()
	// A free port can be taken by someone else before the process binds it;
	// then start over with another.
	for try := 0; ; try++ {
		p := s.launch(name, bin)
		err := p.waitHealthy(30 * time.Second)
		if err == nil {
			return p
		}
		if try < 3 && strings.Contains(p.out.String(), "address already in use") {
			continue
		}
		t.Fatalf("%s did not become healthy: %v\n%s", name, err, p.out.String())
	}
}

func (s *stack) launch(name, bin string) *proc {
	t := s.t
	addr := proctest.FreeAddr(t)
	p := &proc{
		name: name,
		url:  "http://" + addr,
		cmd:  exec.Command(bin, "--listen", addr),
		out:  &proctest.Buffer{},
		done: make(chan struct{}),
	}
	p.cmd.Env = s.env
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	require.NoError(t, p.cmd.Start())
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("%s (pid %d) output:\n%s", p.name, p.cmd.Process.Pid, p.out.String())
		}
	})
	return p
}

func (p *proc) waitHealthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return errors.New("exited")
		default:
		}
		resp, err := http.Get(p.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.New("timed out")
}

// kill ends the process as a crash would (SIGKILL) and waits for it.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop asks the process to stop (SIGTERM), and kills it if it lingers.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		p.kill()
	}
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// run runs the worker binary with args (a CLI command) to completion.
func (s *stack) run(args ...string) (out string, exitCode int) {
	s.t.Helper()
	cmd := exec.Command(bins.worker, args...)
	cmd.Env = s.env
	b, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(b), ee.ExitCode()
	}
	require.NoError(s.t, err)
	return string(b), 0
}

// event is what a test sends: the provider's webhook-id, the body's type, and
// optionally the object it is about (data.id), or none with noObject.
type event struct {
	id, typ, object string
	noObject        bool
	raw             []byte // the whole body instead, which must carry typ
}

func (e event) body() []byte {
	if e.raw != nil {
		return e.raw
	}
	data := map[string]any{"id": cmpStr(e.object, "obj_"+e.id)}
	if e.noObject {
		data = map[string]any{}
	}
	b, _ := json.Marshal(map[string]any{"type": e.typ, "data": data})
	return b
}

func cmpStr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// ack is ingest's answer to a webhook.
type ack struct {
	status    int
	duplicate bool
}

// send posts e to ingest, signed with secret by the official Standard
// Webhooks library.
func (s *stack) send(ingest *proc, e event, secret string) ack {
	s.t.Helper()
	body := e.body()
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(s.t, err)
	now := time.Now()
	sig, err := wh.Sign(e.id, now, body)
	require.NoError(s.t, err)
	req, err := http.NewRequest(http.MethodPost, ingest.url+"/webhooks/"+provider, bytes.NewReader(body))
	require.NoError(s.t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", e.id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	var a struct {
		Duplicate bool `json:"duplicate"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&a)
	return ack{status: resp.StatusCode, duplicate: a.Duplicate}
}

// claimed sends e and requires that it won its claim.
func (s *stack) claimed(ingest *proc, e event) {
	s.t.Helper()
	a := s.send(ingest, e, providerSecret)
	require.Equal(s.t, ack{status: http.StatusOK}, a, "sending %s", e.id)
}

// waitStatus polls until event id's claim has status want, and returns it
// with its deliveries.
func (s *stack) waitStatus(id string, want claim.Status, timeout time.Duration) (claim.Record, []claim.Delivery) {
	s.t.Helper()
	var c claim.Record
	var ds []claim.Delivery
	require.EventuallyWithT(s.t, func(t *assert.CollectT) {
		var err error
		c, ds, err = s.store.Get(context.Background(), provider, id)
		require.NoError(t, err)
		require.Equal(t, want, c.Status, "claim %s/%s: %+v %+v", provider, id, c, ds)
	}, timeout, 25*time.Millisecond, "claim %s/%s is not %s after %s", provider, id, want, timeout)
	return c, ds
}

// deliveryOf returns route's delivery among ds.
func deliveryOf(t *testing.T, ds []claim.Delivery, route string) claim.Delivery {
	t.Helper()
	for _, d := range ds {
		if d.Route == route {
			return d
		}
	}
	t.Fatalf("no delivery to %s among %+v", route, ds)
	return claim.Delivery{}
}

// jobsOf counts the River jobs of event id still stored, in any state: a
// delivery's end deletes its job's row.
func (s *stack) jobsOf(id string) int {
	s.t.Helper()
	return len(testfactory.Jobs(context.Background(), s.t, s.db.Pool, testfactory.JobWhere{Delivery: claim.Key{Provider: provider, EventID: id}}))
}

// runningSince reports whether event id's job is running and was attempted
// longer than d ago (by this machine's clock, which the database shares),
// as River's rescuer will see it.
func (s *stack) runningSince(id string, d time.Duration) bool {
	s.t.Helper()
	for _, j := range testfactory.Jobs(context.Background(), s.t, s.db.Pool, testfactory.JobWhere{
		Delivery: claim.Key{Provider: provider, EventID: id}, State: rivertype.JobStateRunning}) {
		if j.AttemptedAt != nil && time.Since(*j.AttemptedAt) > d {
			return true
		}
	}
	return false
}

// key is the Idempotency-Key the worker must send for id and route.
func key(id, route string) string {
	return claim.Key{Provider: provider, EventID: id, Route: route}.IdempotencyKey()
}

// call is one request the downstream received.
type call struct {
	route    string // the first segment of the path
	path     string // the whole path, escaped
	key      string
	attempt  string // Hookgate-Attempt
	eventID  string
	header   http.Header
	body     []byte
	at       time.Time
	verified bool // signature checked with the official library (signed routes)
	ctx      context.Context
}

// behaviour decides a route's answer to a call; n counts the calls with the
// same key, from 1. It may block (watching c.ctx) and set headers on w.
type behaviour func(c *call, n int, w http.ResponseWriter) int

// downstream is the routes' receiver. Like a real downstream it performs an
// effect once per Idempotency-Key: a key's first 2xx answer is its effect;
// later requests with that key are answered without one.
type downstream struct {
	*httptest.Server
	t        *testing.T
	mu       sync.Mutex
	calls    []*call
	done     map[string]bool
	effects  map[string]int
	behave   map[string]behaviour
	isSigned map[string]bool
	replies  map[string]string // a route's answer body to a 2xx
	bodies   map[string]bodied // a route's whole answer, body included
}

// bodied answers the n-th call with the same key (from 1) with a status,
// a Content-Type and a body.
type bodied func(n int) (code int, contentType, body string)

func newDownstream(t *testing.T) *downstream {
	d := &downstream{t: t, done: map[string]bool{}, effects: map[string]int{}, behave: map[string]behaviour{}, isSigned: map[string]bool{},
		replies: map[string]string{}, bodies: map[string]bodied{}}
	d.Server = httptest.NewServer(http.HandlerFunc(d.serve))
	t.Cleanup(d.Close)
	return d
}

func (d *downstream) signed(route string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.isSigned[route] = true
}

// reply makes route answer its 2xx with body (JSON) from now on.
func (d *downstream) reply(route, body string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.replies[route] = body
}

// answer makes route answer with a from now on, body and all. A 2xx
// answered so is an effect only when the body says {"ok":true}, as a
// workflow whose last node reports its success.
func (d *downstream) answer(route string, a bodied) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.bodies[route] = a
}

// set makes route answer with b from now on; routes answer 200 by default.
func (d *downstream) set(route string, b behaviour) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.behave[route] = b
}

func (d *downstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	route, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	c := &call{
		route: route, path: r.URL.EscapedPath(), key: r.Header.Get("Idempotency-Key"),
		attempt: r.Header.Get("Hookgate-Attempt"), eventID: r.Header.Get("Hookgate-Event-Id"),
		header: r.Header.Clone(), body: body, at: time.Now(), ctx: r.Context(),
	}
	d.mu.Lock()
	if d.isSigned[c.route] {
		wh, _ := standardwebhooks.NewWebhook(routeSecret)
		c.verified = wh.Verify(body, r.Header) == nil
	}
	d.calls = append(d.calls, c)
	n := 0
	for _, o := range d.calls {
		if o.key == c.key {
			n++
		}
	}
	b, reply, whole := d.behave[c.route], d.replies[c.route], d.bodies[c.route]
	d.mu.Unlock()

	if whole != nil {
		code, ct, text := whole(n)
		if code >= 200 && code <= 299 && text == `{"ok":true}` {
			d.effect(c.key)
		}
		if ct != "" {
			w.Header().Set("Content-Type", ct)
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, text)
		return
	}

	code := http.StatusOK
	if b != nil {
		code = b(c, n, w)
	}
	if code >= 200 && code <= 299 {
		d.effect(c.key)
		if reply != "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_, _ = io.WriteString(w, reply)
			return
		}
	}
	w.WriteHeader(code)
}

// effect performs the key's effect unless it was performed already.
func (d *downstream) effect(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.done[key] {
		d.done[key] = true
		d.effects[key]++
	}
}

// callsFor returns the calls made with key, in order.
func (d *downstream) callsFor(key string) []*call {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*call
	for _, c := range d.calls {
		if c.key == key {
			out = append(out, c)
		}
	}
	return out
}

// callsOfEvent returns the calls made for event id, any route.
func (d *downstream) callsOfEvent(id string) []*call {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*call
	for _, c := range d.calls {
		if c.eventID == id {
			out = append(out, c)
		}
	}
	return out
}

// effectsOf returns how many effects key had.
func (d *downstream) effectsOf(key string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.effects[key]
}

// attempts lists the Hookgate-Attempt headers of key's calls.
func (d *downstream) attempts(key string) []string {
	var out []string
	for _, c := range d.callsFor(key) {
		out = append(out, c.attempt)
	}
	return out
}

// answers returns a behaviour answering the n-th call with codes[n-1], and
// the last code after that.
func answers(codes ...int) behaviour {
	return func(_ *call, n int, _ http.ResponseWriter) int {
		return codes[min(n, len(codes))-1]
	}
}
