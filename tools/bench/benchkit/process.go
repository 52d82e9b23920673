package benchkit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// BuildBroker builds ./cmd/broker of the checkout at root (the program users run) into dir.
func BuildBroker(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "broker")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/broker")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("building ./cmd/broker: %w", err)
	}
	return bin, nil
}

// Broker is a running broker process, its output in a log file.
type Broker struct {
	cmd  *exec.Cmd
	log  string
	exit chan error
}

// StartBroker runs bin in dir with env, its output in dir/logName, and returns once base's
// /readyz answers 200 (within 2 minutes); a broker that exits or is not ready is stopped and its
// log's end is in the error.
func StartBroker(ctx context.Context, bin, dir, logName, base string, env []string) (*Broker, error) {
	logPath := filepath.Join(dir, logName)
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting the broker: %w", err)
	}
	b := &Broker{cmd: cmd, log: logPath, exit: make(chan error, 1)}
	go func() { b.exit <- cmd.Wait(); logFile.Close() }()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if resp, err := http.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return b, nil
			}
		}
		select {
		case err := <-b.exit:
			b.exit <- err
			return nil, fmt.Errorf("the broker exited while starting (%v):\n%s", err, b.Tail())
		case <-ctx.Done():
			b.Stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.Stop()
			return nil, errors.New("the broker was not ready within 2 minutes:\n" + b.Tail())
		}
	}
}

// Pid is the broker's process ID.
func (b *Broker) Pid() int { return b.cmd.Process.Pid }

// Tail is the last lines of the broker's log, for errors.
func (b *Broker) Tail() string {
	raw, err := os.ReadFile(b.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// Stop ends the broker with SIGTERM (it shuts down and writes its CPU profile), killing it after
// 45 s; it may be called more than once.
func (b *Broker) Stop() {
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-b.exit:
		b.exit <- err
	case <-time.After(45 * time.Second):
		_ = b.cmd.Process.Kill()
		b.exit <- <-b.exit
	}
}
