package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/hookgate/hookgate/cmd/internal/cli"
)

// runner is one command, made with the common flags and the environment.
type runner interface {
	Run(ctx context.Context, args []string) error
}

// subcommand is one command of a group (`worker claims list`): its name,
// and how to make it with the group's common flags.
type subcommand struct {
	name string
	make func(common cli.Common, env cli.Env) runner
}

// dispatch parses the common flags a group of commands (`worker claims`,
// `worker routes`) takes before the command's name, then runs the command
// args name, or answers help.
func dispatch(ctx context.Context, group, usage string, common cli.Common, env cli.Env, args []string, commands []subcommand) error {
	fs := cli.NewFlagSet("worker "+group, usage, env, &common)
	if err := fs.Parse(args); err != nil {
		return err
	}
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	want := strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	if fs.NArg() == 0 {
		return fmt.Errorf("%s needs a command: %s (see worker %s --help)", group, want, group)
	}
	command, rest := fs.Arg(0), fs.Args()[1:]
	for _, c := range commands {
		if c.name == command {
			return c.make(common, env).Run(ctx, rest)
		}
	}
	if command == "help" {
		fs.Usage()
		return cli.ErrHelp
	}
	return fmt.Errorf("unknown %s command %q: want %s (see worker %s --help)", group, command, want, group)
}
