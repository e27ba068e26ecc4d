package linkem

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// maxControlBody bounds a PUT body; a profile is a few hundred bytes.
const maxControlBody = 64 << 10

// ControlHandler serves the control API, JSON in and out:
//
//	GET    /v1/profiles             the profile state (Profiles)
//	PUT    /v1/profiles/{selector}  set a profile (JSON or YAML body, a Profile); answers with the
//	                                profile as applied, defaults filled in
//	DELETE /v1/profiles/{selector}  remove a client or address override (404 if none)
//	GET    /v1/stats                per-client counters and release precision (Stats)
//
// {selector} is a Selector's text form, e.g. default, class:lossy, client:3, addr:127.0.0.1:4000.
// Errors answer {"error": "..."} with 400 for bad input. There is no authentication: New serves
// it on loopback only.
func (p *Proxy) ControlHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/profiles", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, p.Profiles())
	})
	mux.HandleFunc("PUT /v1/profiles/{selector}", func(w http.ResponseWriter, r *http.Request) {
		sel, err := ParseSelector(r.PathValue("selector"))
		if err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxControlBody))
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("read body: %w", err))
			return
		}
		prof, err := ParseProfile(body)
		if err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		if err := p.SetProfile(sel, prof); err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		writeJSON(w, http.StatusOK, prof)
	})
	mux.HandleFunc("DELETE /v1/profiles/{selector}", func(w http.ResponseWriter, r *http.Request) {
		sel, err := ParseSelector(r.PathValue("selector"))
		if err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		if err := p.ResetProfile(sel); err != nil {
			status := http.StatusBadRequest
			if errors.Is(err, ErrNoOverride) {
				status = http.StatusNotFound
			}
			writeError(w, status, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /v1/stats", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, p.Stats())
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	// The status is already sent; a client that went away is all an encode error can mean.
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, map[string]string{"error": err.Error()})
}
