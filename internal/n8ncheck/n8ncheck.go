// Package n8ncheck is `devtool n8n-check`: it checks what docs/n8n.md
// promises against a real n8n, pinned and installed into .local/n8n, with
// ingest and worker on loopback ports: duplicates, failures, restarts and
// the guide's worked example, counted in n8n's own database.
package n8ncheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/hookgate/hookgate/internal/devlocal"
)

// What `devtool n8n-check` installs and runs.
const (
	// n8nVersion is the n8n release docs/n8n.md is checked against: the
	// newest that runs on Node 20.
	n8nVersion = "1.123.81"
	// n8nXLSXVersion replaces n8n's xlsx dependency, whose tarball n8n
	// names on a host outside the npm registry; this is the newest xlsx
	// the registry serves.
	n8nXLSXVersion = "0.18.5"
	// n8nMinNode is the oldest Node.js n8nVersion runs on.
	n8nMinNode = "20.19"
	// n8nHookgateDB and n8nDB are the databases the check creates, on the
	// server DATABASE_URL names or on devtool's own Postgres.
	n8nHookgateDB = "hookgate_n8n_check"
	n8nDB         = "n8n_check"
)

// n8nCheckTimeout bounds each wait of the check: the machine may be slow,
// and n8n takes a while to start.
const n8nCheckTimeout = 3 * time.Minute

// Run is `devtool n8n-check`: it installs a pinned n8n into dir,
// imports the check's workflows, runs ingest, worker and n8n on loopback
// ports, sends the scenarios' events, counts n8n's executions in n8n's own
// database, prints a table, and stops everything it started.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) (err error) {
	r, err := newN8nCheckRun(args, stdout, stderr)
	if err != nil {
		return err
	}
	defer func() { err = r.undo(err) }()
	if err := checkNode(ctx, r.con); err != nil {
		return err
	}
	if err := installN8n(ctx, r.con, r.dir); err != nil {
		return err
	}
	if err := r.databases(ctx, getenv); err != nil {
		return err
	}
	if err := r.workDir(); err != nil {
		return err
	}
	if err := r.serveAPIs(); err != nil {
		return err
	}
	if err := r.writeConfig(); err != nil {
		return err
	}
	if err := r.importWorkflows(ctx); err != nil {
		return err
	}
	if err := r.startHookgate(ctx); err != nil {
		return err
	}
	if err := r.startN8n(ctx); err != nil {
		return err
	}
	c, rows, err := r.runScenarios(ctx)
	if err != nil {
		return err
	}
	return r.report(stdout, c, rows)
}

// n8nCheckRun is what the phases of `devtool n8n-check` share: its flags,
// what each phase made or started for the next, and how to stop it all.
type n8nCheckRun struct {
	con *devlocal.Console
	// logs is the processes' log file, at logPath in the working directory work.
	logs          *devlocal.Console
	work, logPath string
	// ingestBin and workerBin are the built binaries; dir is where n8n is
	// installed; guide is the text of the guide whose worked example runs.
	ingestBin, workerBin string
	dir                  string
	guide                []byte
	keep                 bool
	// hgURL and n8nURL are hookgate's and n8n's databases.
	hgURL, n8nURL string
	// The loopback addresses the check runs on, and the recorder serving
	// the check's APIs at apiAddr.
	ingestAddr, workerAddr, n8nAddr, brokerAddr string
	rec                                         *recorder
	apiAddr                                     net.Addr
	apiURL, n8nBase                             string
	secrets                                     map[string]string
	cfgPath                                     string
	// n8nBin and n8nEnv run n8n; hgEnv runs ingest and worker.
	n8nBin        string
	n8nEnv, hgEnv []string
	n8n           *n8nProc
	// undos stop what the phases started; see onExit.
	undos []func(error) error
}

// newN8nCheckRun reads n8n-check's flags and the guide, and checks that
// ingest and worker are built, before anything is installed or started.
func newN8nCheckRun(args []string, stdout, stderr io.Writer) (*n8nCheckRun, error) {
	fs := devlocal.NewFlagSet("n8n-check", "n8n-check [--bin DIR] [--dir DIR] [--guide FILE] [--keep-databases]", stderr)
	binDir := fs.String("bin", filepath.Join(devlocal.Dir, "bin"), "directory holding the built ingest and worker")
	dir := fs.String("dir", filepath.Join(devlocal.Dir, "n8n"), "where n8n is installed and the check keeps its files")
	guide := fs.String("guide", "docs/n8n.md", "the guide whose worked example is run")
	keep := fs.Bool("keep-databases", false, "keep the check's two databases afterwards, for a look at them")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("n8n-check takes no arguments, got %q", fs.Args())
	}
	ingestBin, workerBin := filepath.Join(*binDir, "ingest"), filepath.Join(*binDir, "worker")
	for _, bin := range []string{ingestBin, workerBin} {
		if err := devlocal.CheckExecutable(bin); err != nil {
			return nil, err
		}
	}
	absDir, err := filepath.Abs(*dir)
	if err != nil {
		return nil, err
	}
	guideText, err := os.ReadFile(*guide)
	if err != nil {
		return nil, fmt.Errorf("reading the guide: %w", err)
	}
	return &n8nCheckRun{
		con: devlocal.NewConsole(stdout), ingestBin: ingestBin, workerBin: workerBin,
		dir: absDir, guide: guideText, keep: *keep,
	}, nil
}

// onExit registers undo to run on the way out of the check, as a deferred
// call would: undo is given the check's error so far and returns it, with
// its own error joined when it has one to report.
func (r *n8nCheckRun) onExit(undo func(error) error) {
	r.undos = append(r.undos, undo)
}

// undo runs what onExit registered, the last first, so that everything the
// check started is stopped in the reverse order of its start.
func (r *n8nCheckRun) undo(err error) error {
	for i := len(r.undos) - 1; i >= 0; i-- {
		err = r.undos[i](err)
	}
	return err
}

// workDir makes the check's working directory afresh, and opens the log
// the processes the check starts write to.
func (r *n8nCheckRun) workDir() error {
	r.work = filepath.Join(r.dir, "check")
	if err := os.RemoveAll(r.work); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(r.work, "home"), 0o700); err != nil {
		return err
	}
	r.logPath = filepath.Join(r.work, "processes.log")
	logFile, err := os.Create(r.logPath)
	if err != nil {
		return err
	}
	r.onExit(func(err error) error {
		logFile.Close()
		return err
	})
	r.logs = devlocal.NewConsole(logFile)
	return nil
}

// startHookgate migrates hookgate's database and starts the worker, then
// ingest, each once the one before answers /healthz.
func (r *n8nCheckRun) startHookgate(ctx context.Context) error {
	// hookgate.
	r.hgEnv = []string{"PATH=" + os.Getenv("PATH"), "DATABASE_URL=" + r.hgURL, "HOOKGATE_CONFIG=" + r.cfgPath, "HOOKGATE_LOG_FORMAT=text"}
	for k, v := range r.secrets {
		r.hgEnv = append(r.hgEnv, k+"="+v)
	}
	if err := devlocal.RunOnce(ctx, r.logs, 30*time.Second, "migrate", r.ingestBin, []string{"migrate"}, r.hgEnv); err != nil {
		return fmt.Errorf("migrating hookgate's database (see %s): %w", r.logPath, err)
	}
	sup := devlocal.NewSupervisor(r.logs, 40*time.Second)
	r.onExit(func(err error) error {
		r.con.Printf("n8n-check", "stopping ingest and worker")
		return errors.Join(err, sup.StopAll())
	})
	for _, c := range []struct{ name, bin, health string }{
		{"worker", r.workerBin, "http://" + r.workerAddr + "/healthz"},
		{"ingest", r.ingestBin, "http://" + r.ingestAddr + "/healthz"},
	} {
		if err := sup.Start(c.name, c.bin, nil, r.hgEnv); err != nil {
			return err
		}
		if err := devlocal.WaitHealthy(ctx, sup, c.name, c.health); err != nil {
			return fmt.Errorf("%w (see %s)", err, r.logPath)
		}
	}
	r.con.Printf("n8n-check", "ingest on %s, worker on %s, the check's APIs on %s", r.ingestAddr, r.workerAddr, r.apiAddr)
	return nil
}

// startN8n starts n8n, with the workflows imported, and waits until it
// serves their webhooks.
func (r *n8nCheckRun) startN8n(ctx context.Context) error {
	n := &n8nProc{con: r.con, logs: r.logs, bin: r.n8nBin, env: r.n8nEnv, base: r.n8nBase, logPath: r.logPath}
	r.n8n = n
	r.onExit(func(err error) error { return errors.Join(err, n.stop()) })
	if _, err := n.start(ctx); err != nil {
		return err
	}
	return nil
}
