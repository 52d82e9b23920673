package benchkit

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// PostgresSide measures what one database's statements cost PostgreSQL during a run: the
// statements, their execution time and WAL (pg_stat_statements, when the server preloads it, as
// scripts/postgres.sh does) and the CPU time of the whole server (from /proc, when the server
// runs on this machine, as the benches' throwaway server does). A figure that cannot be read is
// left out of the line, never guessed.
type PostgresSide struct {
	db         *sql.DB
	statements bool
	postmaster int
	cpuStart   float64
	// flushStart: the server's WAL flushes so far (pg_stat_wal), -1 when unreadable.
	flushStart float64
}

// PostgresFigures are one run's costs on the PostgreSQL side.
type PostgresFigures struct {
	Statements, ExecMillis, WALBytes float64
	HasStatements                    bool
	CPUSeconds                       float64
	HasCPU                           bool
	// Flushes: the server's WAL flushes (fdatasync), every database's: a commit that waits for
	// its flush causes one, unless it shares another's.
	Flushes    float64
	HasFlushes bool
}

// StartPostgresSide resets db's statement statistics and notes the server's CPU time so far.
func StartPostgresSide(ctx context.Context, db *sql.DB) *PostgresSide {
	p := &PostgresSide{db: db}
	if _, err := db.ExecContext(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err == nil {
		_, err = db.ExecContext(ctx, `SELECT pg_stat_statements_reset(0, (SELECT oid FROM pg_database WHERE datname = current_database()), 0)`)
		p.statements = err == nil
	}
	p.flushStart = walFlushes(ctx, db)
	var backend int
	if err := db.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&backend); err == nil {
		if fields, err := procStat(backend); err == nil {
			if ppid, err := strconv.Atoi(fields[1]); err == nil {
				p.postmaster = ppid
				if cpu, err := serverCPU(ppid); err == nil {
					p.cpuStart = cpu
				} else {
					p.postmaster = 0
				}
			}
		}
	}
	return p
}

// Stop reads the figures since StartPostgresSide.
func (p *PostgresSide) Stop(ctx context.Context) PostgresFigures {
	var f PostgresFigures
	if p.statements {
		// The statistics views are read here, so the reading itself is not among them.
		err := p.db.QueryRowContext(ctx, `SELECT COALESCE(SUM(calls), 0), COALESCE(SUM(total_exec_time), 0), COALESCE(SUM(wal_bytes), 0)
			FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`).
			Scan(&f.Statements, &f.ExecMillis, &f.WALBytes)
		f.HasStatements = err == nil
	}
	if p.postmaster != 0 {
		if cpu, err := serverCPU(p.postmaster); err == nil {
			f.CPUSeconds, f.HasCPU = cpu-p.cpuStart, true
		}
	}
	if end := walFlushes(ctx, p.db); p.flushStart >= 0 && end >= 0 {
		f.Flushes, f.HasFlushes = end-p.flushStart, true
	}
	return f
}

// walFlushes is the server's WAL flushes so far, -1 when pg_stat_wal cannot be read.
func walFlushes(ctx context.Context, db *sql.DB) float64 {
	var n float64
	if err := db.QueryRowContext(ctx, "SELECT wal_sync FROM pg_stat_wal").Scan(&n); err != nil {
		return -1
	}
	return n
}

// Line is the figures per unit (e.g. per provisioning) as "name=value" fields, and the server's
// cores over elapsed seconds.
func (f PostgresFigures) Line(per, elapsedSeconds float64, unit string) string {
	var parts []string
	if f.HasCPU {
		parts = append(parts, fmt.Sprintf("postgres_cores=%.2f postgres_cpu_ms_per_%s=%.1f", f.CPUSeconds/elapsedSeconds, unit, 1000*f.CPUSeconds/per))
	}
	if f.HasStatements {
		parts = append(parts, fmt.Sprintf("statements_per_%s=%.1f exec_ms_per_%s=%.2f wal_kb_per_%s=%.1f",
			unit, f.Statements/per, unit, f.ExecMillis/per, unit, f.WALBytes/1024/per))
	}
	if f.HasFlushes {
		parts = append(parts, fmt.Sprintf("wal_flushes_per_%s=%.2f", unit, f.Flushes/per))
	}
	return strings.Join(parts, " ")
}

// serverCPU is the CPU seconds of a PostgreSQL server: the postmaster's own, that of the
// backends it reaped (cutime, cstime) and that of its living children.
func serverCPU(postmaster int) (float64, error) {
	fields, err := procStat(postmaster)
	if err != nil {
		return 0, err
	}
	total, err := ticks(fields, 11, 12, 13, 14) // utime stime cutime cstime
	if err != nil {
		return 0, err
	}
	children, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", postmaster, postmaster))
	if err != nil {
		return 0, err
	}
	for _, c := range strings.Fields(string(children)) {
		pid, err := strconv.Atoi(c)
		if err != nil {
			continue
		}
		cf, err := procStat(pid)
		if err != nil {
			continue // exited meanwhile: its time is in the postmaster's cutime at the next read
		}
		t, err := ticks(cf, 11, 12)
		if err != nil {
			return 0, err
		}
		total += t
	}
	return total / clockTicks, nil
}

// clockTicks is USER_HZ, 100 on Linux for every architecture Go supports.
const clockTicks = 100

// procStat returns the fields of /proc/PID/stat after the command name: [0] is the state, [1]
// the parent's PID, [11] utime (field 14 of proc(5)).
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 15 {
		return nil, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	return fields, nil
}

func ticks(fields []string, idx ...int) (float64, error) {
	var sum float64
	for _, i := range idx {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat field %d: %w", i, err)
		}
		sum += v
	}
	return sum, nil
}
