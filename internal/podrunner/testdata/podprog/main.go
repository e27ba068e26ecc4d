// Command podprog is the container the pod runner's tests run. It serves HTTP on
// $NETFLEET_BIND_ADDRESS:$NETFLEET_ADMIN_PORT:
//
//	/readyz   503 until $PODPROG_READY_AFTER (a duration, default 200ms) has passed, then 200
//	/healthz  200, or 500 when $PODPROG_UNHEALTHY is set
//	/exit     exits with the code given as ?code=N
//
// On start it writes {pid, args, env, childPid} as JSON to $PODPROG_OUT, if set. With $PODPROG_IGNORE_TERM
// set it ignores SIGTERM; with $PODPROG_CHILD set it starts a `sleep` child first.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type report struct {
	PID      int               `json:"pid"`
	Args     []string          `json:"args"`
	Env      map[string]string `json:"env"`
	ChildPID int               `json:"childPid,omitempty"`
}

func main() {
	code, err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "podprog:", err)
		os.Exit(1)
	}
	fmt.Println("podprog exiting with code", code)
	os.Exit(code)
}

// run serves until /exit and returns the code asked for.
func run() (int, error) {
	if os.Getenv("PODPROG_IGNORE_TERM") != "" {
		signal.Ignore(syscall.SIGTERM)
	}
	readyAfter := 200 * time.Millisecond
	if v := os.Getenv("PODPROG_READY_AFTER"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return 0, fmt.Errorf("PODPROG_READY_AFTER: %w", err)
		}
		readyAfter = d
	}
	rep := report{PID: os.Getpid(), Args: os.Args[1:], Env: map[string]string{}}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		rep.Env[k] = v
	}
	if os.Getenv("PODPROG_CHILD") != "" {
		child := exec.Command("sleep", "600")
		if err := child.Start(); err != nil {
			return 0, fmt.Errorf("start child: %w", err)
		}
		rep.ChildPID = child.Process.Pid
	}

	addr := net.JoinHostPort(os.Getenv("NETFLEET_BIND_ADDRESS"), os.Getenv("NETFLEET_ADMIN_PORT"))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return 0, err
	}
	if out := os.Getenv("PODPROG_OUT"); out != "" {
		if err := writeReport(out, rep); err != nil {
			return 0, err
		}
	}
	fmt.Println("podprog listening on", addr)

	start := time.Now()
	exit := make(chan int, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if time.Since(start) < readyAfter {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if os.Getenv("PODPROG_UNHEALTHY") != "" {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	mux.HandleFunc("/exit", func(w http.ResponseWriter, r *http.Request) {
		code, err := strconv.Atoi(r.URL.Query().Get("code"))
		if err != nil {
			http.Error(w, "code: "+err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case exit <- code:
		default:
		}
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	code := <-exit
	// Finish the /exit answer before exiting.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
	return code, nil
}

// writeReport writes rep to path whole, so a reader never sees half of it.
func writeReport(path string, rep report) error {
	b, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
