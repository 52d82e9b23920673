// Turns an operation's step events (oldest first) into timeline rows: one row per step in the
// order the engine first recorded it, each with its stage, its runs (a bar from start to end),
// the waits between retries, and whether it was skipped or failed.
//
// An event is the end of one step run: the run started at created_at - duration_ms. A retrying
// event opens a wait that lasts until the step's next run starts (polls with the same answer
// are not events, so one wait may cover many of them). The step running now comes from the
// operation (stage, currentStep, currentStepSince), not from events. Older rows also have
// `started` events: they mark a run's start.

const ms = (t) => new Date(t).getTime();

export function buildTimeline(events, op = null, now = Date.now()) {
  const rows = new Map();
  const row = (step, stage) => {
    if (!rows.has(step)) rows.set(step, { step, stage: '', runs: [], waits: [], skipped: false, failed: false, message: '' });
    const r = rows.get(step);
    if (stage) r.stage = stage;
    return r;
  };
  for (const e of events) {
    if (!e.step) continue; // the operation's own closing event
    const r = row(e.step, e.stage);
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
        if (e.type === 'retrying') r.waits.push({ start: end, end: end + (e.wait_ms || 0), message: e.message });
        if (e.type === 'failed') { r.failed = true; r.message = e.message; }
        if (e.type === 'retrying') r.message = e.message;
      }
    }
  }
  for (const r of rows.values()) {
    // A wait ends where the step's next run starts (else at its announced end).
    for (const w of r.waits) {
      const next = r.runs.find((x) => x.start >= w.start);
      if (next) w.end = next.start;
    }
  }
  if (op && ['pending', 'in progress'].includes(op.state) && op.currentStep) {
    const r = row(op.currentStep, op.stage);
    if (!r.runs.some((x) => x.open)) {
      const lastEnd = r.runs.reduce((t, x) => Math.max(t, x.end), -Infinity);
      const wait = r.waits[r.waits.length - 1];
      const since = op.currentStepSince ? ms(op.currentStepSince) : now;
      let start = Math.max(since, lastEnd);
      if (wait && wait.start >= lastEnd) start = wait.end; // waiting until then, running (or polling) since
      if (start <= now) r.runs.push({ start, end: null, open: true, outcome: 'running' });
    }
    r.current = true;
    r.attemptsSoFar = op.currentStepAttempts || 0;
  }
  const list = [...rows.values()];
  if (!list.length) return { rows: [], t0: 0, span: 1 };
  let t0 = Infinity, t1 = -Infinity;
  for (const r of list) {
    for (const run of r.runs) {
      if (run.open) run.end = now;
      t0 = Math.min(t0, run.start);
      t1 = Math.max(t1, run.end);
    }
    for (const w of r.waits) t1 = Math.max(t1, w.end);
  }
  for (const r of list) {
    r.duration = r.runs.reduce((s, x) => s + (x.end - x.start), 0);
    r.attempts = Math.max(r.runs.filter((x) => x.outcome !== 'skipped').length, r.attemptsSoFar || 0);
    r.firstStart = r.runs.length ? r.runs[0].start : t0;
  }
  return { rows: list, t0, span: Math.max(t1 - t0, 1) };
}

// stageGroups splits rows into runs of consecutive rows of one stage (a band per stage).
export function stageGroups(rows) {
  const out = [];
  for (const r of rows) {
    const last = out[out.length - 1];
    if (last && last.stage === r.stage) last.rows.push(r);
    else out.push({ stage: r.stage, rows: [r] });
  }
  return out;
}

export function formatDuration(d) {
  if (d < 1000) return `${Math.round(d)} ms`;
  if (d < 60000) return `${(d / 1000).toFixed(1)} s`;
  const m = Math.floor(d / 60000);
  return `${m} min ${Math.round((d % 60000) / 1000)} s`;
}
