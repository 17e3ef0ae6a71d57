// Command ztsctl is ztsd's operator CLI. Online commands (put, get, search,
// services, attributes, stores, stats, import) talk to the daemon over its
// socket (--socket, else env ZTSD_SOCKET, else ./ztsd.sock when it exists
// and /run/ztsd/ztsd.sock, where the installed service listens, when that
// exists); offline ones work on a stopped data directory.
//
// Exit codes: 0 success, 1 not found or no results, 2 usage (an unknown
// command or flag among them), 3 server or I/O error (no daemon listening
// among them); the error goes to stderr.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ztsd/ztsd/bench"
	"github.com/ztsd/ztsd/client"
	buildversion "github.com/ztsd/ztsd/internal/version"
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

// Socket paths ztsctl tries when neither --socket nor ZTSD_SOCKET names one.
const (
	localSocket   = "./ztsd.sock"         // make run
	installSocket = "/run/ztsd/ztsd.sock" // make install, under systemd
)

// app is the state shared by the commands.
type app struct {
	socket  string
	tcp     string
	timeout time.Duration
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
	// socketChosen: --socket or ZTSD_SOCKET named the socket.
	socketChosen bool
	// getenv and stat are os.Getenv and os.Stat (tests replace them).
	getenv func(string) string
	stat   func(string) (os.FileInfo, error)
}

// resolveSocket picks the daemon socket: --socket, else $ZTSD_SOCKET, else
// ./ztsd.sock if it exists, else /run/ztsd/ztsd.sock if it exists, else
// ./ztsd.sock.
func (a *app) resolveSocket(flagSet bool) {
	switch {
	case flagSet:
		a.socketChosen = true
	case a.getenv("ZTSD_SOCKET") != "":
		a.socket, a.socketChosen = a.getenv("ZTSD_SOCKET"), true
	default:
		a.socket = localSocket
		if _, err := a.stat(localSocket); err != nil {
			if _, err := a.stat(installSocket); err == nil {
				a.socket = installSocket
			}
		}
	}
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

// noDaemon explains a failed dial: where ztsctl looked and how to fix it.
func (a *app) noDaemon(de *client.DialError) error {
	if a.tcp != "" {
		return fmt.Errorf("no ztsd listening at %s (%v): start it with listen = %q in its config, or drop --tcp", a.tcp, de.Err, a.tcp)
	}
	where := a.socket
	if !a.socketChosen {
		where = fmt.Sprintf("%s (also looked for %s)", a.socket, installSocket)
	}
	return fmt.Errorf("no ztsd listening at %s: start it with make run, or set --socket / ZTSD_SOCKET", where)
}

func main() {
	bench.RunHTTPCommitServerIfAsked() // bench's HTTP commit probe starts ztsctl again as its server
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv, stat: os.Stat}
	return a.run(args)
}

func (a *app) run(args []string) int {
	stdin, stdout, stderr := a.stdin, a.stdout, a.stderr
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
	var de *client.DialError
	if errors.As(err, &de) {
		err = &exitError{exitFailure, a.noDaemon(de)}
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
	if isUsage(err) || strings.HasPrefix(err.Error(), "unknown command ") {
		return exitUsage // cobra's unknown-command error is not typed
	}
	return exitFailure
}

func newRoot(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:           "ztsctl",
		Short:         "Operate a ztsd trace store: write, read, search, import, verify and repair traces",
		Version:       buildversion.String("ztsctl", version),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, args []string) {
			a.resolveSocket(cmd.Flags().Changed("socket"))
		},
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.PersistentFlags().StringVar(&a.socket, "socket", localSocket,
		"daemon socket (else env ZTSD_SOCKET, else "+localSocket+" or, when only it exists, "+installSocket+")")
	root.PersistentFlags().StringVar(&a.tcp, "tcp", "", "talk to the daemon's TCP listener at this address instead of the socket")
	root.PersistentFlags().DurationVar(&a.timeout, "timeout", 5*time.Minute, "give up on the daemon after this long")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageErr("%v", err) })
	root.AddCommand(newPutCmd(a), newGetCmd(a), newSearchCmd(a), newServicesCmd(a), newAttributesCmd(a),
		newStoresCmd(a), newStatsCmd(a), newVersionCmd())
	for _, extra := range extraCommands {
		root.AddCommand(extra(a))
	}
	return root
}

// version is set by the linker (-X main.version=...).
var version = "dev"

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print ztsctl's version",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), buildversion.String("ztsctl", version))
			return err
		},
	}
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
