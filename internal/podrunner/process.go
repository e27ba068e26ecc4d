package podrunner

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// process is one run of a container's binary, the leader of its own process group.
type process struct {
	pid     int
	started time.Time

	// done is closed once the process has exited, been reaped and the rest of its group killed;
	// the fields below are set before.
	done     chan struct{}
	finished time.Time
	exitCode int32

	termOnce sync.Once
}

// startProcess starts binary with args and env in dir, its stdout and stderr appended to logPath
// as prefixed lines.
func startProcess(binary string, args, env []string, dir, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	lw := &logWriter{f: logFile}
	// Our own pipes rather than exec's copying goroutines: Wait then returns as soon as the
	// process exits, even if something it started still holds the pipes.
	outR, outW, err := os.Pipe()
	if err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		_ = logFile.Close()
		closeAll(outR, outW)
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	cmd := exec.Command(binary, args...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		closeAll(outR, outW, errR, errW)
		lw.line("runner", fmt.Sprintf("start %s: %v", binary, err))
		_ = logFile.Close()
		return nil, err
	}
	closeAll(outW, errW)
	p := &process{pid: cmd.Process.Pid, started: time.Now(), done: make(chan struct{})}
	lw.line("runner", fmt.Sprintf("started %s %q pid %d", binary, args, p.pid))

	var copying sync.WaitGroup
	for stream, r := range map[string]*os.File{"stdout": outR, "stderr": errR} {
		copying.Add(1)
		go func() {
			defer copying.Done()
			lw.copyLines(stream, r)
			_ = r.Close()
		}()
	}
	go func() {
		// The exit status is read from ProcessState; an error alone says nothing more.
		_ = cmd.Wait()
		p.finished = time.Now()
		p.exitCode = exitCode(cmd.ProcessState)
		// A container's processes die with its main process.
		_ = killGroup(p.pid, syscall.SIGKILL)
		lw.line("runner", fmt.Sprintf("pid %d exited with code %d", p.pid, p.exitCode))
		close(p.done)
		copying.Wait()
		_ = logFile.Close()
	}()
	return p, nil
}

// terminate stops the process as a container runtime stops a container: SIGTERM now, SIGKILL to
// its whole group once grace has passed. It returns at once; done tells when the process is gone.
func (p *process) terminate(grace time.Duration) {
	p.termOnce.Do(func() {
		_ = syscall.Kill(p.pid, syscall.SIGTERM)
		go func() {
			t := time.NewTimer(grace)
			defer t.Stop()
			select {
			case <-p.done:
			case <-t.C:
				_ = killGroup(p.pid, syscall.SIGKILL)
			}
		}()
	})
}

// killGroup signals the process group led by pid. Once the leader is reaped its group id stays
// reserved while members live, so this never hits an unrelated process.
func killGroup(pid int, sig syscall.Signal) error {
	err := syscall.Kill(-pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// exitCode reports the exit code as container runtimes do: 128+n for death by signal n.
func exitCode(st *os.ProcessState) int32 {
	if st == nil {
		// Wait failed before the process could be reaped, which only a broken system does.
		return 128
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int32(ws.Signal())
	}
	return int32(st.ExitCode())
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

// logTimeFormat is RFC 3339 with a fixed-width fraction, so log columns line up.
const logTimeFormat = "2006-01-02T15:04:05.000000Z07:00"

// logWriter appends timestamped, stream-prefixed lines to a container's log file.
type logWriter struct {
	mu sync.Mutex
	f  *os.File
}

func (w *logWriter) line(stream, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _ = fmt.Fprintf(w.f, "%s %s %s\n", time.Now().UTC().Format(logTimeFormat), stream, text)
}

// copyLines copies r to the log line by line; a line longer than the buffer is split.
func (w *logWriter) copyLines(stream string, r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			if chunk[len(chunk)-1] == '\n' {
				chunk = chunk[:len(chunk)-1]
			}
			w.line(stream, string(chunk))
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}
