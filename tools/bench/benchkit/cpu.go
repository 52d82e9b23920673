package benchkit

import (
	"context"
	"database/sql"
	"fmt"
	"syscall"
	"time"
)

// CPUWindow measures the CPU time this process and the PostgreSQL server spend over a window
// of a run: with the machine's cores saturated, a rate says as much about the other processes
// on it as about the code measured, while CPU per unit of work says what the code costs.
type CPUWindow struct {
	process float64
	pg      *PostgresSide
}

// CPU is what one window cost: this process's user and system time, and the PostgreSQL
// server's (every backend, not only the measured database's) when it could be read.
type CPU struct {
	Process, Postgres float64
	HasPostgres       bool
}

// StartCPUWindow starts a window; db (nil: no PostgreSQL side) is a connection to the server
// whose CPU time counts.
func StartCPUWindow(ctx context.Context, db *sql.DB) *CPUWindow {
	w := &CPUWindow{}
	if db != nil {
		w.pg = StartPostgresSide(ctx, db)
	}
	w.process = processCPU()
	return w
}

// Stop ends the window.
func (w *CPUWindow) Stop(ctx context.Context) CPU {
	c := CPU{Process: processCPU() - w.process}
	if w.pg != nil {
		f := w.pg.Stop(ctx)
		c.Postgres, c.HasPostgres = f.CPUSeconds, f.HasCPU
	}
	return c
}

// Total is the process's and the server's CPU seconds together.
func (c CPU) Total() float64 { return c.Process + c.Postgres }

// PerUnit formats the window's CPU per unit of work in microseconds: the total, then the
// process's and the server's shares.
func (c CPU) PerUnit(units int, unit string) string {
	us := func(s float64) float64 { return s * 1e6 / float64(units) }
	if !c.HasPostgres {
		return fmt.Sprintf("cpu_us_per_%s=%.1f", unit, us(c.Process))
	}
	return fmt.Sprintf("cpu_us_per_%s=%.1f (process %.1f, postgres %.1f)", unit, us(c.Total()), us(c.Process), us(c.Postgres))
}

// processCPU is this process's user and system CPU seconds so far.
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
