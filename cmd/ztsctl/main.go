// Command ztsctl is ztsd's operator CLI. Online commands (put, get, search,
// stores, stats, import) talk to the daemon over its socket (--socket,
// env ZTSD_SOCKET, default ./ztsd.sock); offline ones work on a stopped
// data directory.
//
// Exit codes: 0 success, 1 not found or no results, 2 usage, 3 server or
// I/O error; the error goes to stderr.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ztsd/ztsd/client"
)

// Exit codes.
const (
	exitOK       = 0
	exitNotFound = 1
	exitUsage    = 2
	exitFailure  = 3
)

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(format string, args ...any) error {
	return &exitError{exitUsage, fmt.Errorf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &exitError{exitNotFound, fmt.Errorf(format, args...)}
}

// app is the state shared by the commands.
type app struct {
	socket  string
	tcp     string
	timeout time.Duration
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
}

// client connects to the daemon; every warning of its answers (damaged
// chunks left out) is printed to stderr.
func (a *app) client() *client.Client {
	var c *client.Client
	if a.tcp != "" {
		c = client.NewTCP(a.tcp)
	} else {
		c = client.New(a.socket)
	}
	c.OnWarning(func(w client.Warning) { fmt.Fprintf(a.stderr, "ztsctl: warning: %s\n", w) })
	return c
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr}
	root := newRoot(a)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "ztsctl:", err)
	return exitCode(err)
}

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if errors.Is(err, client.ErrNotFound) {
		return exitNotFound
	}
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Status == 400 {
		return exitUsage
	}
	if isUsage(err) {
		return exitUsage
	}
	return exitFailure
}

func newRoot(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:           "ztsctl",
		Short:         "Operate a ztsd trace store: write, read, search, import, verify and repair traces",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	def := os.Getenv("ZTSD_SOCKET")
	if def == "" {
		def = "./ztsd.sock"
	}
	root.PersistentFlags().StringVar(&a.socket, "socket", def, "daemon socket (env ZTSD_SOCKET)")
	root.PersistentFlags().StringVar(&a.tcp, "tcp", "", "talk to the daemon's TCP listener at this address instead of the socket")
	root.PersistentFlags().DurationVar(&a.timeout, "timeout", 5*time.Minute, "give up on the daemon after this long")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageErr("%v", err) })
	root.AddCommand(newPutCmd(a), newGetCmd(a), newSearchCmd(a), newStoresCmd(a), newStatsCmd(a))
	for _, extra := range extraCommands {
		root.AddCommand(extra(a))
	}
	return root
}

// extraCommands are registered by the files that implement them.
var extraCommands []func(*app) *cobra.Command

func isUsage(err error) bool {
	var ue interface{ Usage() bool }
	return errors.As(err, &ue) && ue.Usage()
}

func (a *app) ctx(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cmd.Context(), a.timeout)
}
