package controllers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/netfleet/netfleet/api/netcode"
)

// PushError is a failed call to a game server's admin API.
type PushError struct {
	// Reason is one of unreachable, refused, conflict, unauthorized, other.
	Reason string
	// StatusCode is the HTTP status, 0 when no answer came.
	StatusCode int
	// Message is the server's error text, or the transport error.
	Message string
	// Field names the refused config field (422).
	Field string
	// Generation is the generation the server runs (409).
	Generation int64
	err        error
}

func (e *PushError) Error() string {
	if e.StatusCode == 0 {
		return fmt.Sprintf("admin API %s: %s", e.Reason, e.Message)
	}
	return fmt.Sprintf("admin API %s (HTTP %d): %s", e.Reason, e.StatusCode, e.Message)
}

func (e *PushError) Unwrap() error { return e.err }

// Pusher is the operator's client of the game servers' admin API (DESIGN §4). It is safe for
// concurrent use; connections to each server are kept alive between calls.
type Pusher struct {
	client *http.Client
	poll   *http.Client
}

// NewPusher returns a Pusher whose calls each take at most timeout; a lifecycle long-poll takes
// at most its wait and timeout.
func NewPusher(timeout time.Duration) *Pusher {
	dialer := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		// Pod IPs are never reached through an HTTP proxy from the environment.
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: timeout,
	}
	// The long-poll's answer comes only after its wait, so it has its own client, without the
	// answer timeout; the request's context bounds it.
	pollTransport := transport.Clone()
	pollTransport.ResponseHeaderTimeout = 0
	pollTransport.MaxIdleConnsPerHost = 1
	return &Pusher{
		client: &http.Client{Transport: transport, Timeout: timeout},
		poll:   &http.Client{Transport: pollTransport},
	}
}

// Allocate delivers an allocation to a game server (PUT /v1/allocation) and returns the
// lifecycle it reports once the game has seen it.
func (p *Pusher) Allocate(ctx context.Context, endpoint, token string, a netcode.Allocation) (netcode.LifecycleStatus, error) {
	var st netcode.LifecycleStatus
	body, err := json.Marshal(a)
	if err != nil {
		return st, fmt.Errorf("encode allocation: %w", err)
	}
	err = p.do(ctx, p.client, http.MethodPut, "http://"+endpoint+netcode.PathAllocation, token, body, &st)
	return st, err
}

// Lifecycle long-polls a game server's lifecycle (GET /v1/lifecycle?since=): it returns once the
// version differs from since, or after wait with the unchanged status.
func (p *Pusher) Lifecycle(ctx context.Context, endpoint, token string, since uint64, wait time.Duration) (netcode.LifecycleStatus, error) {
	var st netcode.LifecycleStatus
	ctx, cancel := context.WithTimeout(ctx, wait+p.client.Timeout)
	defer cancel()
	url := fmt.Sprintf("http://%s%s?since=%d&waitMillis=%d", endpoint, netcode.PathLifecycle, since, wait.Milliseconds())
	err := p.do(ctx, p.poll, http.MethodGet, url, token, nil, &st)
	return st, err
}

// Status reads the config a game server runs (GET /v1/netcode). endpoint is host:port.
func (p *Pusher) Status(ctx context.Context, endpoint, token string) (netcode.ConfigStatus, error) {
	var st netcode.ConfigStatus
	err := p.do(ctx, p.client, http.MethodGet, "http://"+endpoint+netcode.PathNetcode, token, nil, &st)
	return st, err
}

// Push sends a config to a game server (PUT /v1/netcode) and returns the config the server runs
// afterwards. It observes netfleet_operator_config_push_duration_seconds and counts failures in
// netfleet_operator_config_push_errors_total.
func (p *Pusher) Push(ctx context.Context, endpoint, token string, push netcode.ConfigPush) (netcode.ConfigStatus, error) {
	body, err := json.Marshal(push)
	if err != nil {
		return netcode.ConfigStatus{}, fmt.Errorf("encode config push: %w", err)
	}
	start := time.Now()
	var st netcode.ConfigStatus
	err = p.do(ctx, p.client, http.MethodPut, "http://"+endpoint+netcode.PathNetcode, token, body, &st)
	configPushDuration.Observe(time.Since(start).Seconds())
	if err != nil {
		reason := pushErrOther
		if pe, ok := errors.AsType[*PushError](err); ok {
			reason = pe.Reason
		}
		configPushErrors.WithLabelValues(reason).Inc()
	}
	return st, err
}

// PushConnectKeys sends a fleet's connect-token keys and the address tokens name to a game server
// (PUT /v1/connect-keys) and returns the key ids the server holds afterwards.
func (p *Pusher) PushConnectKeys(ctx context.Context, endpoint, token string, push netcode.ConnectKeysPush) (netcode.ConnectKeysStatus, error) {
	var st netcode.ConnectKeysStatus
	body, err := json.Marshal(push)
	if err != nil {
		return st, fmt.Errorf("encode connect keys push: %w", err)
	}
	err = p.do(ctx, p.client, http.MethodPut, "http://"+endpoint+netcode.PathConnectKeys, token, body, &st)
	if err != nil {
		reason := pushErrOther
		if pe, ok := errors.AsType[*PushError](err); ok {
			reason = pe.Reason
		}
		configPushErrors.WithLabelValues(reason).Inc()
	}
	return st, err
}

// do calls url and decodes a 200 answer into out; any other answer is a *PushError.
func (p *Pusher) do(ctx context.Context, hc *http.Client, method, url, token string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return &PushError{Reason: pushErrOther, Message: err.Error(), err: err}
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		// The transport's errors name the URL, never the headers, so the token cannot leak here.
		return &PushError{Reason: pushErrUnreachable, Message: err.Error(), err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, netcode.MaxAdminBodyBytes))
	if err != nil {
		return &PushError{Reason: pushErrUnreachable, StatusCode: resp.StatusCode, Message: "read answer: " + err.Error(), err: err}
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, out); err != nil {
			return &PushError{Reason: pushErrOther, StatusCode: resp.StatusCode, Message: "decode answer: " + err.Error(), err: err}
		}
		return nil
	}
	pe := &PushError{StatusCode: resp.StatusCode, Message: http.StatusText(resp.StatusCode)}
	var er netcode.ErrorResponse
	if json.Unmarshal(raw, &er) == nil && er.Error != "" {
		pe.Message, pe.Field, pe.Generation = er.Error, er.Field, er.Generation
	}
	switch {
	case resp.StatusCode == http.StatusUnprocessableEntity:
		pe.Reason = pushErrRefused
	case resp.StatusCode == http.StatusConflict:
		pe.Reason = pushErrConflict
	case resp.StatusCode == http.StatusUnauthorized:
		pe.Reason = pushErrUnauthorized
	case resp.StatusCode >= 500:
		// A server that answers 5xx is up but not able to take config now (e.g. its tick loop
		// did not run the push in time); like a timeout, it is worth retrying.
		pe.Reason = pushErrUnreachable
	default:
		pe.Reason = pushErrOther
	}
	return pe
}
