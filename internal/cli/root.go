// Package cli is the command line of kubectl-multinet, the kubectl plugin
// of multinet ("kubectl multinet ..."; docs/kubectl-multinet.md).
//
// NewRootCommand builds the command tree; each subcommand lives in its own
// file with a newXxxCommand(Streams) constructor added in NewRootCommand.
// Run executes it and maps its outcome to the process exit status.
package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Exit statuses of kubectl-multinet.
const (
	// ExitOK: the command succeeded (lint: every object is valid).
	ExitOK = 0
	// ExitInvalid: lint found an invalid object.
	ExitInvalid = 1
	// ExitUsage: bad flags or arguments, or input that cannot be read or
	// parsed as YAML or JSON.
	ExitUsage = 2
)

// Streams are the standard streams of one invocation.
type Streams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

// ExitError carries a command's exit status. A nil Err means the command has
// already said everything it had to say.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// NewRootCommand returns the "kubectl-multinet" command with its subcommands.
func NewRootCommand(s Streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "kubectl-multinet",
		Short: "Work with multinet's pod networks (NPWG multi-net spec v1.3)",
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: "kubectl multinet",
		},
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.ErrOut)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("%w\nSee '%s --help'.", err, c.CommandPath())}
	})
	root.AddCommand(newLintCommand(s))
	root.AddCommand(newGetCommand(s))
	root.AddCommand(newExplainCommand(s))
	return root
}

// Run runs kubectl-multinet with args (without the program name) and returns
// the exit status; errors are written to s.ErrOut.
func Run(args []string, s Streams) int {
	root := NewRootCommand(s)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return ExitOK
	}
	code := ExitUsage // cobra's own errors: unknown command, bad arguments
	var ee *ExitError
	if errors.As(err, &ee) {
		code = ee.Code
		err = ee.Err
	}
	if err != nil {
		fmt.Fprintf(s.ErrOut, "error: %v\n", err)
	}
	return code
}
