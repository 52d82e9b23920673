// Turns an operation's step events (oldest first) into timeline rows: one row per step in the
// order the engine first touched it, each with its runs (a bar from start to end), the waits
// between retries, and whether it was skipped or failed.

const ms = (t) => new Date(t).getTime();

export function buildTimeline(events, now = Date.now()) {
  const rows = new Map();
  const row = (step) => {
    if (!rows.has(step)) rows.set(step, { step, runs: [], waits: [], skipped: false, failed: false, message: '' });
    return rows.get(step);
  };
  for (const e of events) {
    const r = row(e.step);
    const end = ms(e.created_at);
    const open = r.runs.find((x) => x.open);
    switch (e.type) {
      case 'started':
        r.runs.push({ start: end, end: null, open: true, outcome: 'running' });
        break;
      case 'skipped':
        r.skipped = true;
        r.message = e.message || r.message;
        r.runs.push({ start: end, end, open: false, outcome: 'skipped' });
        break;
      default: { // succeeded, failed, retrying: the run ends here
        const start = end - (e.duration_ms || 0);
        const run = open || { start };
        if (!open) r.runs.push(run);
        Object.assign(run, { start: Math.min(run.start, start), end, open: false, outcome: e.type, message: e.message });
        if (e.type === 'retrying' && e.wait_ms > 0) r.waits.push({ start: end, end: end + e.wait_ms, message: e.message });
        if (e.type === 'failed') { r.failed = true; r.message = e.message; }
        if (e.type === 'retrying') r.message = e.message;
      }
    }
  }
  const list = [...rows.values()];
  let t0 = Infinity, t1 = -Infinity;
  for (const r of list) {
    for (const run of r.runs) {
      if (run.open) run.end = now;
      t0 = Math.min(t0, run.start);
      t1 = Math.max(t1, run.end);
    }
  }
  if (!list.length) return { rows: [], t0: 0, span: 1 };
  for (const r of list) {
    r.duration = r.runs.reduce((s, x) => s + (x.end - x.start), 0);
    r.attempts = r.runs.filter((x) => x.outcome !== 'skipped').length;
    r.firstStart = r.runs.length ? r.runs[0].start : t0;
  }
  return { rows: list, t0, span: Math.max(t1 - t0, 1) };
}

export function formatDuration(d) {
  if (d < 1000) return `${Math.round(d)} ms`;
  if (d < 60000) return `${(d / 1000).toFixed(1)} s`;
  const m = Math.floor(d / 60000);
  return `${m} min ${Math.round((d % 60000) / 1000)} s`;
}
