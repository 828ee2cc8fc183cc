package devlocal

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"syscall"
	"time"
)

// Proc is one child process of devtool. It runs in a process group of its
// own (see childAttr), whose id is its pid, so stopping it signals the group
// and catches any process it started in turn.
type Proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and its output is printed
	err  error         // what Wait returned; read only after done is closed
}

// StartProc starts path with args and env, its stdout and stderr printed on
// con as coming from name.
func StartProc(con *Console, name, path string, args, env []string) (*Proc, error) {
	cmd := exec.Command(path, args...)
	cmd.Env = env
	out := con.Writer(name)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = childAttr()
	// A grandchild that keeps the output pipe open must not hold up Wait.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s (%s): %w", name, path, err)
	}
	p := &Proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		out.Flush()
		close(p.done)
	}()
	return p, nil
}

// Exited reports whether p has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM to p's process group and waits up to grace for p to
// exit, then kills the group. Whatever is left in the group afterwards is
// killed too, so nothing p started outlives it. It returns how p exited.
func (p *Proc) Stop(grace time.Duration) error {
	pgid := p.cmd.Process.Pid
	if !p.Exited() {
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

// Supervisor keeps the long-running children of `devtool run`: it notices
// the first one to exit on its own and stops them all in reverse order of
// start, so a process is stopped before what it depends on.
type Supervisor struct {
	con   *Console
	grace time.Duration // how long a child may take to stop after SIGTERM
	procs []*Proc
	// exited receives the first child to exit; later exits are dropped,
	// since the first one already ends the run.
	exited chan *Proc
}

// NewSupervisor returns a supervisor printing on con whose children get
// grace to stop after SIGTERM.
func NewSupervisor(con *Console, grace time.Duration) *Supervisor {
	return &Supervisor{con: con, grace: grace, exited: make(chan *Proc, 1)}
}

// Start starts a child and watches it.
func (s *Supervisor) Start(name, path string, args, env []string) error {
	p, err := StartProc(s.con, name, path, args, env)
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

// StopAll stops every child, last started first, one at a time, and returns
// what went wrong: a child that would not stop, or one that stopped with an
// error. A child that had already exited is only mentioned; whoever noticed
// its exit reports it.
func (s *Supervisor) StopAll() error {
	var errs []error
	for _, p := range slices.Backward(s.procs) {
		if p.Exited() {
			s.con.Printf("devtool", "%s had already exited (%s)", p.name, exitText(p.err))
			continue
		}
		s.con.Printf("devtool", "stopping %s", p.name)
		if err := p.Stop(s.grace); err != nil {
			s.con.Printf("devtool", "%v", err)
			errs = append(errs, err)
			continue
		}
		s.con.Printf("devtool", "%s stopped", p.name)
	}
	s.procs = nil
	return errors.Join(errs...)
}

// RunOnce runs a child to completion, such as `ingest migrate`. When ctx ends
// first, the child is stopped as Stop does, and ctx's error returned.
func RunOnce(ctx context.Context, con *Console, grace time.Duration, name, path string, args, env []string) error {
	p, err := StartProc(con, name, path, args, env)
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
		_ = p.Stop(grace)
		return ctx.Err()
	}
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// Exited returns the channel that receives the first child to exit on its
// own.
func (s *Supervisor) Exited() <-chan *Proc { return s.exited }

// Name is the name p's output is printed under.
func (p *Proc) Name() string { return p.name }

// ExitText says how p exited; it is meant for after p has exited.
func (p *Proc) ExitText() string { return exitText(p.err) }

// Kill ends p's process group with SIGKILL, as a crash or the OOM killer
// would, and waits for p to exit.
func (p *Proc) Kill() error {
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("killing %s: %w", p.name, err)
	}
	<-p.done
	return nil
}
