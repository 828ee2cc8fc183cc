// Package cli holds the start-up plumbing both binaries share: flags, the
// config file, the logger, the database pool and the migrate subcommand.
// It keeps each main's run function about wiring, not parsing.
package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookgate/hookgate/internal/claim"
	"github.com/hookgate/hookgate/internal/config"
	"github.com/hookgate/hookgate/internal/route"
	"github.com/hookgate/hookgate/internal/sanitize"
	"github.com/hookgate/hookgate/internal/secretfile"
)

// Env is what a binary receives from its process, passed in so that tests
// can run a binary in-process with their own environment.
type Env struct {
	Getenv func(string) string
	Stdout io.Writer
	Stderr io.Writer
}

// ErrHelp is returned when --help was asked for; the usage is already printed.
var ErrHelp = flag.ErrHelp

// Common are the flags every command of both binaries takes.
type Common struct {
	ConfigPath string
	Listen     string
}

// NewFlagSet returns a flag set for command name that registers the common
// flags into c and prints usage to env.Stderr. usage is the synopsis line.
// What c already holds (flags given before a subcommand) is the default.
func NewFlagSet(name, usage string, env Env, c *Common) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.StringVar(&c.ConfigPath, "config", c.ConfigPath, "config file (default $HOOKGATE_CONFIG, else "+config.DefaultPath+")")
	fs.Usage = func() {
		fmt.Fprintf(env.Stderr, "usage: %s\n\nEnvironment:\n  DATABASE_URL     PostgreSQL URL (required)\n  HOOKGATE_CONFIG  config file when --config is not given\n  Secrets are read from the variables the config file names; they are never printed.\n\nFlags:\n", usage)
		fs.PrintDefaults()
	}
	return fs
}

// LoadConfig reads the config file the flags or environment name.
func LoadConfig(c Common, env Env) (*config.Config, error) {
	return config.Load(config.Path(c.ConfigPath, env.Getenv))
}

// Logger returns a structured logger writing JSON to env.Stderr, or text when
// HOOKGATE_LOG_FORMAT=text (easier to read in a terminal), at the level
// HOOKGATE_LOG_LEVEL names (default info).
func Logger(env Env) *slog.Logger {
	// HOOKGATE_LOG_LEVEL is debug, info, warn or error; anything else is info.
	var level slog.Level
	if err := level.UnmarshalText([]byte(env.Getenv("HOOKGATE_LOG_LEVEL"))); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if strings.EqualFold(env.Getenv("HOOKGATE_LOG_FORMAT"), "text") {
		return slog.New(slog.NewTextHandler(env.Stderr, opts))
	}
	return slog.New(slog.NewJSONHandler(env.Stderr, opts))
}

// DefaultMaxConns is the pool size when DATABASE_URL does not set
// pool_max_conns. pgx's own default (the CPU count, at least 4) queues
// requests behind few connections while Postgres has headroom.
const DefaultMaxConns = 20

// PoolOption adjusts a pool's configuration before it connects.
type PoolOption func(*pgxpool.Config)

// AfterConnect has f ready each new connection of the pool before it is
// used; a connection f fails is not used.
func AfterConnect(f func(context.Context, *pgx.Conn) error) PoolOption {
	return func(cfg *pgxpool.Config) { cfg.AfterConnect = f }
}

// OpenPool connects to DATABASE_URL and checks the server answers. The URL
// may name several hosts (h1:5432,h2:5432); the pool keeps to the one that
// accepts writes (see followPrimary).
func OpenPool(ctx context.Context, env Env, opts ...PoolOption) (*pgxpool.Pool, error) {
	url := env.Getenv("DATABASE_URL")
	if url == "" {
		return nil, errors.New("DATABASE_URL is not set")
	}
	return OpenURL(ctx, config.CellURL{Name: config.DefaultCell, URL: url, Key: "DATABASE_URL"}, opts...)
}

// OpenURL connects to one cell's database, as OpenPool does to
// DATABASE_URL; messages name c.Key, never the URL.
func OpenURL(ctx context.Context, c config.CellURL, opts ...PoolOption) (*pgxpool.Pool, error) {
	pool, err := newPool(ctx, c, opts...)
	if err != nil {
		return nil, err
	}
	if err := ping(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// newPool makes c's pool without connecting.
func newPool(ctx context.Context, c config.CellURL, opts ...PoolOption) (*pgxpool.Pool, error) {
	cfg, err := poolConfig(c.URL, c.Key)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(c.URL, "pool_max_conns") {
		cfg.MaxConns = DefaultMaxConns
	}
	for _, o := range opts {
		o(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to the database: %w", err)
	}
	return pool, nil
}

// ping checks that pool's server answers, naming its hosts if not.
func ping(ctx context.Context, pool *pgxpool.Pool) error {
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		return fmt.Errorf("connecting to the database at %s: %w", hosts(&pool.Config().ConnConfig.Config), err)
	}
	return nil
}

// poolConfig parses a database URL (DATABASE_URL's form, or a cell's,
// which key names in messages) into a pool configuration that keeps to the
// host accepting writes (followPrimary) and names its sessions hookgate
// unless the URL names them.
func poolConfig(url, key string) (*pgxpool.Config, error) {
	if url == "" {
		return nil, fmt.Errorf("%s is not set", key)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's message would quote the URL; it may hold a password.
		return nil, fmt.Errorf("%s is not a valid PostgreSQL URL or connection string", key)
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = cmp.Or(cfg.ConnConfig.RuntimeParams["application_name"], "hookgate")
	if !strings.Contains(url, "connect_timeout") {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	followPrimary(cfg, url)
	return cfg, nil
}

// DefaultConnectTimeout bounds each attempt to connect to one host of a
// database URL that sets no connect_timeout: a host that does not answer
// (a cell's, a failed primary's) costs a request, a job or the next host
// of the list this long, rather than the system's TCP timeout (minutes).
const DefaultConnectTimeout = 10 * time.Second

// OpenReadPool opens the pool the operator API and the console read
// through on the database at url (DATABASE_URL's form; one per database),
// sized and bounded by rp (claim.ReadPool). Its sessions are named as the
// worker's with " reads" after, so that pg_stat_activity tells them
// apart. pool_max_conns in url sizes the worker's pool, not this one.
func OpenReadPool(url string, rp config.ReadPool) (*claim.ReadPool, error) {
	cfg, err := poolConfig(url, "DATABASE_URL")
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.RuntimeParams["application_name"] += " reads"
	return claim.OpenReadPool(cfg, claim.ReadLimits{
		MaxConns:         int32(rp.MaxConns),
		StatementTimeout: rp.StatementTimeout.D(),
		WaitTimeout:      rp.WaitTimeout.D(),
	})
}

// Migrate is the `migrate` subcommand of both binaries: it needs only the
// config file's cells (DATABASE_URL without them), migrates every cell in
// turn, each under its own lock, and reports what it applied on
// env.Stdout. c holds the flags given before the subcommand.
func Migrate(ctx context.Context, name string, c Common, args []string, env Env) error {
	fs := NewFlagSet(name+" migrate", name+" migrate [--config FILE]", env, &c)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cells, err := migrateCells(c, env)
	if err != nil {
		return err
	}
	for _, cell := range cells {
		if err := migrateCell(ctx, cell, len(cells) > 1, env); err != nil {
			return err
		}
	}
	return nil
}

// Server is what both long-running binaries start from.
type Server struct {
	Config  *config.Config
	Secrets config.Secrets
	// Routes is the route table, every jq program compiled once.
	Routes *route.Table
	// Redactor knows every secret the binary read: Secrets, the ops
	// password, the console's secrets and DATABASE_URL's password. Logger
	// already redacts them.
	Redactor *sanitize.Redactor
	Logger   *slog.Logger
	// Pool is the first cell's pool (Cells[0].Pool): where the console,
	// its users and the operator commands read for now.
	Pool *pgxpool.Pool
	// Cells are every cell's pool, in configuration order.
	Cells []CellPool
}

// Boot loads the config and the secrets it names, compiles the routes, and
// opens the logger and the pool, in that order, so that a config, secret or
// program problem stops the binary before it touches the database. The caller applies c.Listen to the
// address it serves on, and closes Pool. opts adjust the pool.
func Boot(ctx context.Context, c Common, env Env, opts ...PoolOption) (*Server, error) {
	cfg, err := LoadConfig(c, env)
	if err != nil {
		return nil, err
	}
	secrets, err := cfg.ResolveSecrets(env.Getenv)
	if err != nil {
		return nil, err
	}
	routes, err := route.New(cfg, secrets.Headers)
	if err != nil {
		return nil, err
	}
	cells, err := cfg.ResolveCells(env.Getenv)
	if err != nil {
		return nil, err
	}
	red := Redactor(cfg, secrets, env)
	logger := slog.New(red.Handler(Logger(env).Handler()))
	pools, err := openCells(ctx, cells, logger, opts...)
	if err != nil {
		return nil, err
	}
	if len(cfg.Cells) > 0 && env.Getenv("DATABASE_URL") != "" {
		logger.Info("DATABASE_URL is set and ignored: the config file lists cells, each with its own database")
	}
	return &Server{Config: cfg, Secrets: secrets, Routes: routes, Redactor: red, Logger: logger,
		Pool: pools[0].Pool, Cells: pools}, nil
}

// Redactor returns a redactor of every secret value the binaries read:
// those the config names (the console's passwords and tokens included, and
// secret files as they are at start), HOOKGATE_UI_PASSWORD, and the
// password in DATABASE_URL and in every cell's URL.
func Redactor(cfg *config.Config, secrets config.Secrets, env Env) *sanitize.Redactor {
	values := append(secrets.Values(), env.Getenv("HOOKGATE_UI_PASSWORD"))
	for _, u := range cfg.Console.Users {
		values = append(values, env.Getenv(u.PasswordEnv))
	}
	for _, t := range cfg.Console.Tokens {
		values = append(values, env.Getenv(t.TokenEnv))
	}
	for _, p := range cfg.Providers {
		if r := p.Reconcile; r != nil {
			values = append(values, env.Getenv(r.APIKeyEnv), env.Getenv(r.TokenEnv))
		}
	}
	// Secret files as they are at start; the binary that reads one fails
	// its start on a file it cannot read.
	var paths []string
	for _, p := range cfg.Providers {
		paths = append(paths, p.SecretsFile...)
		if r := p.Reconcile; r != nil {
			paths = append(paths, r.APIKeyFile, r.TokenFile, r.PrivateKeyFile)
		}
	}
	for _, r := range cfg.Routes {
		paths = append(paths, r.SigningSecretFile)
	}
	for _, u := range cfg.Console.Users {
		paths = append(paths, u.PasswordFile)
	}
	for _, t := range cfg.Console.Tokens {
		paths = append(paths, t.TokenFile)
	}
	for _, path := range paths {
		if b, err := secretfile.Read(path); err == nil && path != "" {
			values = append(values, string(b))
		}
	}
	urls := []string{env.Getenv("DATABASE_URL")}
	if cells, err := cfg.ResolveCells(env.Getenv); err == nil {
		for _, c := range cells {
			urls = append(urls, c.URL)
		}
	}
	for _, raw := range urls {
		if u, err := url.Parse(raw); err == nil && u.User != nil {
			if pass, ok := u.User.Password(); ok {
				values = append(values, pass)
			}
		}
	}
	return sanitize.NewRedactor(values...)
}

// Exit turns run's error into a process exit code, printing it as one line
// prefixed with the binary's name. --help exits 0; every other error,
// usage errors included, exits 1.
func Exit(name string, err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, ErrHelp):
		return 0
	}
	fmt.Fprintf(stderr, "%s: %s\n", name, strings.ReplaceAll(err.Error(), "\n", "; "))
	return 1
}
