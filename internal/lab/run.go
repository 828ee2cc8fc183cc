package lab

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookgate/hookgate/internal/devlocal"
)

// labOptions is what a run of the lab's matrix needs.
type labOptions struct {
	// dbURL names a database migrated for hookgate; the designs make their
	// own tables in it.
	dbURL string
	// self runs devtool (its hidden lab-design command) with selfEnv as
	// its environment, less DATABASE_URL.
	self    string
	selfEnv []string
	// ingestBin and workerBin are the built binaries of design 5.
	ingestBin, workerBin string
	// workDir holds hookgate's config.
	workDir string
	// designs and scenarios are the matrix to run, by name.
	designs, scenarios []string
	// copies is how many copies of the event the copies scenario sends at once.
	copies int
	// logs takes the children's output; con the progress lines.
	logs, con *devlocal.Console
}

// labRun is one run of the matrix.
type labRun struct {
	labOptions
	db       *pgxpool.Pool
	down     *labDownstream
	downURL  string
	provider *labProvider
	secret   string
	progress *labProgress
}

// runLab runs every cell of the matrix: designs 1–4 one after another, and
// hookgate beside them, since its crash cells spend most of their time
// waiting for River's rescue. It returns the cells in the table's order.
func runLab(ctx context.Context, o labOptions) ([]labResult, error) {
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte(devlocal.RandomHex(16)))
	provider, err := newLabProvider(secret)
	if err != nil {
		return nil, err
	}
	db, err := pgxpool.New(ctx, o.dbURL)
	if err != nil {
		return nil, fmt.Errorf("connecting to the lab's database: %w", err)
	}
	defer db.Close()
	down := newLabDownstream()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for the lab downstream: %w", err)
	}
	srv := &http.Server{Handler: down, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	defer func() {
		_ = srv.Close()
		<-served
	}()
	l := &labRun{
		labOptions: o, db: db, down: down, downURL: "http://" + ln.Addr().String(), provider: provider, secret: secret,
		progress: &labProgress{con: o.con, total: len(o.designs) * len(o.scenarios)},
	}
	defer provider.client.CloseIdleConnections()

	var (
		mu      sync.Mutex
		results []labResult
		errs    []error
		wg      sync.WaitGroup
	)
	collect := func(rs []labResult, err error) {
		mu.Lock()
		defer mu.Unlock()
		results = append(results, rs...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if slices.Contains(o.designs, designHookgate) {
		wg.Go(func() { collect(l.runColumn(ctx, designHookgate, o.scenarios, l.hookgateTargetFor(), true)) })
	}
	wg.Go(func() {
		for _, d := range o.designs {
			if d != designHookgate && ctx.Err() == nil {
				collect(l.runColumn(ctx, d, o.scenarios, l.designTargetFor(d), false))
			}
		}
	})
	wg.Wait()
	slices.SortFunc(results, func(a, b labResult) int {
		if c := designIndex(a.design) - designIndex(b.design); c != 0 {
			return c
		}
		return scenarioIndex(a.scenario) - scenarioIndex(b.scenario)
	})
	return results, errors.Join(errs...)
}

func designIndex(name string) int {
	return slices.IndexFunc(labDesigns, func(d labDesignInfo) bool { return d.name == name })
}

func scenarioIndex(name string) int {
	return slices.IndexFunc(labScenarios, func(s labScenarioInfo) bool { return s.name == name })
}
