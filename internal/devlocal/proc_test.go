package devlocal

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hookgate/hookgate/internal/proctest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Shell children standing in for ingest, worker and the receiver. Each runs
// sleep as a child of its own, so a test also sees whether what a child
// started is gone with it.
const (
	// politeChild says when it is asked to stop, then stops.
	politeChild = `trap 'echo "$0 got TERM"; exit 0' TERM; echo "$0 up"; while :; do sleep 0.1; done`
	// stubbornChild ignores SIGTERM, and so does its sleep.
	stubbornChild = `trap '' TERM; echo "$0 up"; while :; do sleep 0.1; done`
)

type supervisorBundle struct {
	sup *Supervisor
	out *proctest.Buffer
}

func setupSupervisor(t *testing.T, grace time.Duration) supervisorBundle {
	t.Helper()
	out := &proctest.Buffer{}
	sup := NewSupervisor(NewConsole(out), grace)
	t.Cleanup(func() { _ = sup.StopAll() })
	return supervisorBundle{sup: sup, out: out}
}

// startShell starts script under /bin/sh as a child called name, and waits
// until it has printed "name up", so its trap is in place.
func (b supervisorBundle) startShell(t *testing.T, name, script string) *Proc {
	t.Helper()
	require.NoError(t, b.sup.Start(name, "/bin/sh", []string{"-c", script, name}, os.Environ()))
	require.Eventually(t, func() bool { return strings.Contains(b.out.String(), name+" up") }, 5*time.Second, 10*time.Millisecond)
	return b.sup.procs[len(b.sup.procs)-1]
}

// requireGroupGone fails unless no process is left in p's process group. A
// grandchild killed with its parent is reparented to init, and counts until
// init reaps it, so this waits a little.
func requireGroupGone(t *testing.T, p *Proc) {
	t.Helper()
	require.Eventually(t, func() bool {
		return errors.Is(syscall.Kill(-p.cmd.Process.Pid, 0), syscall.ESRCH)
	}, 5*time.Second, 10*time.Millisecond, "a process of %s's group is still running", p.name)
}

func TestSupervisorStopsInReverseOrder(t *testing.T) {
	t.Parallel()
	b := setupSupervisor(t, 5*time.Second)

	var procs []*Proc
	for _, name := range []string{"receiver", "worker", "ingest"} {
		procs = append(procs, b.startShell(t, name, politeChild))
	}
	for _, p := range procs {
		require.NotEqual(t, os.Getpid(), p.cmd.Process.Pid)
		pgid, err := syscall.Getpgid(p.cmd.Process.Pid)
		require.NoError(t, err)
		require.Equal(t, p.cmd.Process.Pid, pgid, "%s is not in a group of its own", p.name)
	}

	require.NoError(t, b.sup.StopAll())

	var order []string
	for line := range strings.Lines(b.out.String()) {
		if strings.Contains(line, "got TERM") || strings.Contains(line, "[devtool]") {
			order = append(order, strings.Join(strings.Fields(line), " "))
		}
	}
	require.Equal(t, []string{
		"[devtool] stopping ingest", "[ingest] ingest got TERM", "[devtool] ingest stopped",
		"[devtool] stopping worker", "[worker] worker got TERM", "[devtool] worker stopped",
		"[devtool] stopping receiver", "[receiver] receiver got TERM", "[devtool] receiver stopped",
	}, order)
	for _, p := range procs {
		requireGroupGone(t, p)
	}
}

func TestSupervisorKillsAfterGrace(t *testing.T) {
	t.Parallel()
	b := setupSupervisor(t, 300*time.Millisecond)

	polite := b.startShell(t, "receiver", politeChild)
	stubborn := b.startShell(t, "worker", stubbornChild)

	start := time.Now()
	err := b.sup.StopAll()
	require.ErrorContains(t, err, "worker did not stop within 300ms of SIGTERM; killed it")
	require.NotContains(t, err.Error(), "receiver")
	require.Less(t, time.Since(start), 5*time.Second)
	requireGroupGone(t, stubborn)
	requireGroupGone(t, polite)
}

func TestSupervisorReportsExit(t *testing.T) {
	t.Parallel()
	b := setupSupervisor(t, 5*time.Second)

	stays := b.startShell(t, "receiver", politeChild)
	require.NoError(t, b.sup.Start("ingest", "/bin/sh", []string{"-c", "echo 'listen: address already in use' >&2; exit 3"}, os.Environ()))

	select {
	case p := <-b.sup.exited:
		require.Equal(t, "ingest", p.name)
		require.EqualError(t, p.err, "exit status 3")
	case <-time.After(5 * time.Second):
		t.Fatal("the exit was not reported")
	}
	require.Contains(t, b.out.String(), "[ingest]   listen: address already in use\n")

	require.NoError(t, b.sup.StopAll())
	require.Contains(t, b.out.String(), "ingest had already exited (exit status 3)")
	require.Contains(t, b.out.String(), "receiver got TERM")
	requireGroupGone(t, stays)
}

func TestRunOnce(t *testing.T) {
	t.Parallel()

	t.Run("completes", func(t *testing.T) {
		t.Parallel()
		out := &proctest.Buffer{}
		err := RunOnce(context.Background(), NewConsole(out), time.Second, "migrate", "/bin/sh", []string{"-c", "printf 'applied 3\\nno newline at the end'"}, nil)
		require.NoError(t, err)
		require.Equal(t, "[migrate]  applied 3\n[migrate]  no newline at the end\n", out.String())
	})
	t.Run("fails", func(t *testing.T) {
		t.Parallel()
		err := RunOnce(context.Background(), NewConsole(&proctest.Buffer{}), time.Second, "migrate", "/bin/sh", []string{"-c", "exit 1"}, nil)
		require.EqualError(t, err, "migrate: exit status 1")
	})
	t.Run("stopped when ctx ends", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		err := RunOnce(ctx, NewConsole(&proctest.Buffer{}), 5*time.Second, "migrate", "/bin/sh", []string{"-c", politeChild, "migrate"}, nil)
		require.True(t, errors.Is(err, context.DeadlineExceeded), "got %v", err)
	})
	t.Run("missing binary", func(t *testing.T) {
		t.Parallel()
		err := RunOnce(context.Background(), NewConsole(&proctest.Buffer{}), time.Second, "migrate", "/nonexistent/ingest", nil, nil)
		require.ErrorContains(t, err, "starting migrate (/nonexistent/ingest)")
	})
}
