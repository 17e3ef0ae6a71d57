package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/ztsd/ztsd/ingest/zorka"
)

// The Zorka agent protocol (DESIGN.md; notes §15.5): agent data (symbol
// definitions) and trace data per agent session, answered 202 as the ZICO
// collector did. An unknown or expired session is answered 412, which the
// agent takes as "resend your symbols with a reset"; malformed bodies get
// 400 naming the byte offset.

// ZorkaContentType is what agents send.
const ZorkaContentType = "application/zorka+cbor+v1"

func (s *Server) registerAgent(sessions *zorka.Sessions) {
	s.route("POST /agent/submit/agd", "agent_agd", write, func(w http.ResponseWriter, r *http.Request) error {
		sid, reset, body, err := s.agentRequest(w, r)
		if err != nil {
			return err
		}
		if err := sessions.SubmitAgentData(sid, reset, body); err != nil {
			return agentError(err)
		}
		w.WriteHeader(http.StatusAccepted)
		return nil
	})
	s.route("POST /agent/submit/trc", "agent_trc", write, func(w http.ResponseWriter, r *http.Request) error {
		sid, reset, body, err := s.agentRequest(w, r)
		if err != nil {
			return err
		}
		spans, err := sessions.SubmitTraceData(sid, reset, r.Header.Get("X-Zorka-Trace-ID"), body)
		if err != nil {
			return agentError(err)
		}
		if len(spans) > 0 {
			if err := s.limits.Load().Ingest.CheckSpans(spans); err != nil {
				return err
			}
			if err := s.db.Append(r.Context(), spans); err != nil {
				return err
			}
			s.metrics.ingestSpans.Add(float64(len(spans)))
			s.metrics.ingestRequests.Inc()
		}
		w.WriteHeader(http.StatusAccepted)
		return nil
	})
}

func (s *Server) agentRequest(w http.ResponseWriter, r *http.Request) (sid string, reset bool, body []byte, err error) {
	if ct := mediaType(r.Header.Get("Content-Type")); ct != ZorkaContentType && ct != "application/cbor" && ct != "" {
		return "", false, nil, &Error{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
			Msg: fmt.Sprintf("Content-Type %q: agent submissions are %s", ct, ZorkaContentType)}
	}
	sid = r.Header.Get("X-Zorka-Session-ID")
	if sid == "" {
		return "", false, nil, badRequest("X-Zorka-Session-ID header is missing")
	}
	if v := r.Header.Get("X-Zorka-Session-Reset"); v != "" {
		if reset, err = strconv.ParseBool(strings.TrimSpace(v)); err != nil {
			return "", false, nil, badRequest("X-Zorka-Session-Reset %q: want true or false", v)
		}
	}
	lim := s.limits.Load()
	body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, lim.MaxBodySize))
	if err != nil {
		return "", false, nil, err
	}
	if len(body) == 0 {
		return "", false, nil, badRequest("empty agent submission")
	}
	return sid, reset, body, nil
}

func agentError(err error) error {
	var de *zorka.DecodeError
	switch {
	case errors.As(err, &de), errors.Is(err, zorka.ErrInvalidRequest):
		return badRequest("%v", err)
	case errors.Is(err, zorka.ErrUnknownSession):
		return &Error{Status: http.StatusPreconditionFailed, Code: "unknown_session",
			Msg: err.Error() + ": resend agent data with X-Zorka-Session-Reset: true"}
	}
	return err
}
