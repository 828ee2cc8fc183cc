package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"syscall"
	"time"
)

// proc is one child process of devtool. It runs in a process group of its
// own (see childAttr), whose id is its pid, so stopping it signals the group
// and catches any process it started in turn.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and its output is printed
	err  error         // what Wait returned; read only after done is closed
}

// startProc starts path with args and env, its stdout and stderr printed on
// con as coming from name.
func startProc(con *console, name, path string, args, env []string) (*proc, error) {
	cmd := exec.Command(path, args...)
	cmd.Env = env
	out := con.writer(name)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = childAttr()
	// A grandchild that keeps the output pipe open must not hold up Wait.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s (%s): %w", name, path, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		out.flush()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether p has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to p's process group and waits up to grace for p to
// exit, then kills the group. Whatever is left in the group afterwards is
// killed too, so nothing p started outlives it. It returns how p exited.
func (p *proc) stop(grace time.Duration) error {
	pgid := p.cmd.Process.Pid
	if !p.exited() {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-p.done:
		case <-t.C:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-p.done
			return fmt.Errorf("%s did not stop within %s of SIGTERM; killed it", p.name, grace)
		}
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL) // ESRCH when the group is empty, as it should be
	if p.err != nil {
		return fmt.Errorf("%s: %w", p.name, p.err)
	}
	return nil
}

// supervisor keeps the long-running children of `devtool run`: it notices
// the first one to exit on its own and stops them all in reverse order of
// start, so a process is stopped before what it depends on.
type supervisor struct {
	con   *console
	grace time.Duration // how long a child may take to stop after SIGTERM
	procs []*proc
	// exited receives the first child to exit; later exits are dropped,
	// since the first one already ends the run.
	exited chan *proc
}

func newSupervisor(con *console, grace time.Duration) *supervisor {
	return &supervisor{con: con, grace: grace, exited: make(chan *proc, 1)}
}

// start starts a child and watches it.
func (s *supervisor) start(name, path string, args, env []string) error {
	p, err := startProc(s.con, name, path, args, env)
	if err != nil {
		return err
	}
	s.procs = append(s.procs, p)
	go func() {
		<-p.done
		select {
		case s.exited <- p:
		default:
		}
	}()
	return nil
}

// stopAll stops every child, last started first, one at a time, and returns
// what went wrong: a child that would not stop, or one that stopped with an
// error. A child that had already exited is only mentioned; whoever noticed
// its exit reports it.
func (s *supervisor) stopAll() error {
	var errs []error
	for _, p := range slices.Backward(s.procs) {
		if p.exited() {
			s.con.printf("devtool", "%s had already exited (%s)", p.name, exitText(p.err))
			continue
		}
		s.con.printf("devtool", "stopping %s", p.name)
		if err := p.stop(s.grace); err != nil {
			s.con.printf("devtool", "%v", err)
			errs = append(errs, err)
			continue
		}
		s.con.printf("devtool", "%s stopped", p.name)
	}
	s.procs = nil
	return errors.Join(errs...)
}

// runOnce runs a child to completion, such as `ingest migrate`. When ctx ends
// first, the child is stopped as stop does, and ctx's error returned.
func runOnce(ctx context.Context, con *console, grace time.Duration, name, path string, args, env []string) error {
	p, err := startProc(con, name, path, args, env)
	if err != nil {
		return err
	}
	select {
	case <-p.done:
		if p.err != nil {
			return fmt.Errorf("%s: %w", name, p.err)
		}
		return nil
	case <-ctx.Done():
		_ = p.stop(grace)
		return ctx.Err()
	}
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}
