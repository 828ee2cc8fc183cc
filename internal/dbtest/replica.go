package dbtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookgate/hookgate/internal/pgcluster"
)

// Replication says how a primary made by NewReplicated waits for its standby.
type Replication int

const (
	// Synchronous makes every commit wait until the standby has flushed it
	// (synchronous_commit=on, synchronous_standby_names naming the standby).
	Synchronous Replication = iota
	// Asynchronous commits locally and streams to the standby afterwards, so
	// the last commits before the primary's loss may never reach it.
	Asynchronous
)

// standbyName is the standby's application_name, as the primary's
// synchronous_standby_names lists it.
const standbyName = "standby1"

// NewReplicated starts a primary of t's own and a streaming standby made
// from it with pg_basebackup -R, replicating as mode says, for failover
// tests: kill the primary, promote the standby. Commits are durable on both
// (synchronous_commit=on, unlike NewCluster's). Both are removed when t ends.
func NewReplicated(t testing.TB, mode Replication) (primary, standby *pgcluster.Cluster) {
	t.Helper()
	ctx := context.Background()
	parent, err := os.MkdirTemp("", "hookgate-testpg-")
	if err != nil {
		t.Fatalf("starting a replicated pair: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	// The servers may run as another user (postgres, when we are root).
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatalf("starting a replicated pair: %v", err)
	}
	settings := []string{"synchronous_commit=on", "wal_level=replica"}
	primarySettings := settings
	if mode == Synchronous {
		// On the command line, not in postgresql.auto.conf: the standby's copy
		// must not make the promoted server wait for a standby it lacks.
		primarySettings = append(primarySettings, "synchronous_standby_names="+standbyName)
	}
	primary, err = pgcluster.Start(ctx, filepath.Join(parent, "primary"), 0, primarySettings...)
	if err != nil {
		t.Fatalf("starting the primary: %v", err)
	}
	t.Cleanup(func() { _ = primary.Remove(context.Background()) })
	standby, err = primary.StartStandby(ctx, filepath.Join(parent, "standby"), 0, standbyName, settings...)
	if err != nil {
		t.Fatalf("starting the standby: %v", err)
	}
	t.Cleanup(func() { _ = standby.Remove(context.Background()) })
	if err := waitStreaming(ctx, primary.URL("postgres"), mode); err != nil {
		t.Fatalf("waiting for the standby to stream: %v", err)
	}
	return primary, standby
}

// waitStreaming polls the primary until its standby streams and, for
// Synchronous, is the synchronous one: only then is the pair what the
// caller asked for.
func waitStreaming(ctx context.Context, url string, mode Replication) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	want := map[Replication]string{Synchronous: "sync", Asynchronous: "async"}[mode]
	var state, syncState string
	for range 3000 {
		err := conn.QueryRow(ctx, `SELECT state, sync_state FROM pg_stat_replication`).Scan(&state, &syncState)
		if err == nil && state == "streaming" && syncState == want {
			return nil
		}
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("after 60 s the standby is %q (%q), not streaming (%q)", state, syncState, want)
}

// String names the mode, for logs.
func (m Replication) String() string {
	if m == Synchronous {
		return "synchronous"
	}
	return "asynchronous"
}
