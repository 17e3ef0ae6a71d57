package zorka

import (
	"errors"
	"fmt"
)

// DecodeError reports malformed agent or trace data: what was wrong and the
// byte offset in the submitted body where it was found. The socket API
// answers it with 400.
type DecodeError struct {
	Offset int
	Msg    string
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("zorka: at byte offset %d: %s", e.Offset, e.Msg)
}

func decodeErrorf(off int, format string, args ...any) *DecodeError {
	return &DecodeError{Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// ErrUnknownSession is returned (wrapped) for a submission naming a session
// that does not exist or has expired, unless it asks for a reset (agent
// data). The agent answers it by resending its symbols with a reset.
var ErrUnknownSession = errors.New("zorka: unknown agent session")

// ErrInvalidRequest is returned (wrapped) for a malformed session id or
// trace id header.
var ErrInvalidRequest = errors.New("zorka: invalid request")
