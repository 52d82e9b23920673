// The operator console: a hash-routed Preact app (htm templates, no build step) over the
// public operator API.
import { html, render, useState, useEffect, useCallback, useRef } from './vendor/preact-htm.js';
import { get, put, query } from './api.js';
import { buildTimeline, stageGroups, formatDuration } from './timeline.js';

const STATES = ['provisioning', 'provisioned', 'failed', 'updating', 'upgrading', 'deprovisioning', 'deprovisioned', 'suspended', 'expired'];
const FINAL_ORCH = ['succeeded', 'failed', 'canceled'];
const POLL_MS = 1000;
// The runtimes list (and its counts) refreshes this often: a fleet-wide read, less often than an
// operation's progress.
const REFRESH_MS = 5000;

// --- routing: #/path?query ---------------------------------------------------------------

function parseHash() {
  const raw = location.hash.replace(/^#/, '') || '/runtimes';
  const [path, qs] = raw.split('?');
  return { parts: path.split('/').filter(Boolean).map(decodeURIComponent), params: Object.fromEntries(new URLSearchParams(qs || '')) };
}

function navigate(path, params = {}) {
  location.hash = `#${path}${query(params)}`;
}

// --- data hooks -----------------------------------------------------------------------------

// useAPI loads fn() when deps change and, while poll(data) says so, again every opts.interval
// ms (POLL_MS by default: an operation in progress updates live). A tick is skipped while the
// tab is hidden or opts.paused() holds; a tab shown again loads at once.
function useAPI(fn, deps, poll, opts = {}) {
  const [state, setState] = useState({ data: null, error: null, loading: true });
  const pollRef = useRef(poll);
  pollRef.current = poll;
  const optsRef = useRef(opts);
  optsRef.current = opts;
  const load = useCallback(fn, deps);
  useEffect(() => {
    let alive = true;
    let timer = null;
    let last = null;
    const schedule = () => {
      const p = pollRef.current;
      if (alive && last !== null && p && p(last)) timer = setTimeout(tick, optsRef.current.interval || POLL_MS);
    };
    const run = async () => {
      try {
        const data = await load();
        if (!alive) return;
        last = data;
        setState({ data, error: null, loading: false });
      } catch (error) {
        if (alive) setState((s) => ({ ...s, error, loading: false }));
      }
      schedule();
    };
    const tick = () => {
      timer = null;
      if (document.hidden || (optsRef.current.paused && optsRef.current.paused())) schedule();
      else run();
    };
    // Back from a hidden tab: refresh now rather than at the next tick.
    const onVisible = () => {
      if (!document.hidden && timer !== null) { clearTimeout(timer); timer = null; run(); }
    };
    document.addEventListener('visibilitychange', onVisible);
    setState((s) => ({ ...s, loading: true }));
    run();
    return () => { alive = false; clearTimeout(timer); document.removeEventListener('visibilitychange', onVisible); };
  }, [load]);
  return state;
}

// --- small components -------------------------------------------------------------------

const Badge = ({ state }) => html`<span class=${`badge state-${(state || 'unknown').replace(/\s+/g, '-')}`}>${state || 'unknown'}</span>`;
const ErrorBox = ({ error }) => error && html`<p class="error" role="alert">${error.message}</p>`;
const time = (t) => (t ? new Date(t).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '');
const Link = ({ to, children, ...rest }) => html`<a href=${`#${to}`} ...${rest}>${children}</a>`;
const JSONBlock = ({ value }) => html`<pre class="json">${JSON.stringify(value ?? {}, null, 2)}</pre>`;
const num = (n) => Number(n || 0).toLocaleString('en-US');

// Pager moves between pages; Notice says which rows of how many a page shows, when not all fit.
function Pager({ page, pages, go, label = 'Pages' }) {
  return html`<nav class="pager" aria-label=${label}>
    <button type="button" disabled=${page <= 1} onClick=${() => go(page - 1)}>Previous</button>
    <span>Page ${page} of ${pages}</span>
    <button type="button" disabled=${page >= pages} onClick=${() => go(page + 1)}>Next</button>
  </nav>`;
}

// getPage reads one page of a list and notes which page it is: while the next page loads, the
// notice goes on describing the rows still shown.
const getPage = async (path, page, size) => ({ ...(await get(`${path}${query({ page, page_size: size })}`)), page, size });

function PageNotice({ data, shown, total, what }) {
  if (!total) return null;
  const { page, size } = data;
  const from = shown ? (page - 1) * size + 1 : 0;
  const to = shown ? from + shown - 1 : 0;
  return html`<p class="page-notice" role="status">Showing ${num(from)}–${num(to)} of ${num(total)} ${what}${total > shown ? '; the pages below have the rest' : ''}</p>`;
}

// pageParams reads page and page_size from the route (the API bounds page_size to 1,000).
function pageParams(params, size) {
  const page = Math.max(1, Number(params.page) || 1);
  const pageSize = Math.min(1000, Math.max(1, Number(params.page_size) || size));
  return { page, pageSize };
}

function Field({ label, name, value, onInput, children }) {
  const id = `f-${name}`;
  return html`<div class="field"><label for=${id}>${label}</label>
    ${children ? html`<select id=${id} name=${name} value=${value} onChange=${(e) => onInput(name, e.target.value)}>${children}</select>`
      : html`<input id=${id} name=${name} value=${value} onInput=${(e) => onInput(name, e.target.value)} autocomplete="off" />`}
  </div>`;
}

// --- runtimes ---------------------------------------------------------------------------

// Columns and the API's sort key of each: the API sorts the whole list, not the page.
const COLUMNS = [
  ['instance_id', 'Instance'], ['global_account_id', 'Account'], ['subaccount_id', 'Subaccount'],
  ['plan', 'Plan'], ['region', 'Region'], ['state', 'State'], ['created_at', 'Created'],
];
const DEFAULT_SORT = { sort: 'created_at', order: 'desc' }; // newest first

function Counts({ info }) {
  if (!info) return null;
  const chips = (title, m, param) => html`<div class="counts" aria-label=${title}><h2>${title}</h2><ul>
    ${Object.entries(m || {}).sort().map(([k, n]) => html`<li><${Link} to=${`/runtimes${query({ [param]: k })}`}>${param === 'state' ? html`<${Badge} state=${k} />` : k} <strong>${n}</strong><//></li>`)}
  </ul></div>`;
  return html`<section class="summary" aria-label="Counts"><p class="total">${info.total} live runtimes</p>
    ${chips('By state', info.states, 'state')}${chips('By plan', info.plans, 'plan')}</section>`;
}

const FILTERS = ['id', 'account', 'subaccount', 'plan', 'region', 'state'];

function Runtimes({ params }) {
  const [form, setForm] = useState(params);
  useEffect(() => setForm(params), [JSON.stringify(params)]);
  const sort = { sort: params.sort || DEFAULT_SORT.sort, order: params.order || (params.sort ? 'asc' : DEFAULT_SORT.order) };
  const { page, pageSize } = pageParams(params, 50);
  // The list refreshes every REFRESH_MS, but not while the filter is edited and not applied:
  // rows moving under the operator's hands while typing would be a trap of their own.
  // Paused too while a filter field has focus: the operator is about to change the filter.
  const formRef = useRef(null);
  const [focused, setFocused] = useState(false);
  useEffect(() => {
    const f = formRef.current;
    if (!f) return undefined;
    const on = () => setFocused(Boolean(document.activeElement?.matches?.('form.filters input, form.filters select')));
    // On focusout the next element has no focus yet: look once it has.
    const off = () => setTimeout(on);
    f.addEventListener('focusin', on);
    f.addEventListener('focusout', off);
    return () => { f.removeEventListener('focusin', on); f.removeEventListener('focusout', off); };
  }, []);
  const editing = focused || FILTERS.some((k) => (form[k] || '') !== (params[k] || ''));
  const refresh = { interval: REFRESH_MS, paused: () => editing };
  const info = useAPI(() => get('/info/runtimes'), [], () => true, refresh);
  const list = useAPI(async () => {
    const base = { account: params.account, subaccount: params.subaccount, plan: params.plan, region: params.region, state: params.state, ...sort, page, page_size: pageSize };
    if (!params.id) return get(`/runtimes${query(base)}`);
    // The search box takes an instance or a runtime ID.
    const byInstance = await get(`/runtimes${query({ ...base, instance_id: params.id })}`);
    return byInstance.totalCount ? byInstance : get(`/runtimes${query({ ...base, runtime_id: params.id })}`);
  }, [JSON.stringify(params)], () => true, refresh);
  const set = (k, v) => setForm((f) => ({ ...f, [k]: v }));
  const submit = (e) => { e.preventDefault(); navigate('/runtimes', { ...form, page: '' }); };
  const rows = list.data?.data || [];
  const sortBy = (k) => navigate('/runtimes', { ...params, page: '', sort: k, order: sort.sort === k && sort.order === 'asc' ? 'desc' : 'asc' });
  const pages = Math.max(1, Math.ceil((list.data?.totalCount || 0) / pageSize));
  const go = (p) => navigate('/runtimes', { ...params, page: p });
  return html`<h1>Runtimes</h1>
    <${Counts} info=${info.data} /><${ErrorBox} error=${info.error} />
    <form class="filters" role="search" aria-label="Filter runtimes" onSubmit=${submit} ref=${formRef}>
      <${Field} label="Instance or runtime ID" name="id" value=${form.id || ''} onInput=${set} />
      <${Field} label="Global account" name="account" value=${form.account || ''} onInput=${set} />
      <${Field} label="Subaccount" name="subaccount" value=${form.subaccount || ''} onInput=${set} />
      <${Field} label="Plan" name="plan" value=${form.plan || ''} onInput=${set} />
      <${Field} label="Region" name="region" value=${form.region || ''} onInput=${set} />
      <${Field} label="State" name="state" value=${form.state || ''} onInput=${set}>
        <option value="">any (live)</option>${STATES.map((s) => html`<option value=${s}>${s}</option>`)}
      <//>
      <div class="buttons"><button type="submit">Filter</button>
        <button type="button" class="secondary" onClick=${() => { setForm({}); navigate('/runtimes'); }}>Clear</button></div>
    </form>
    <${ErrorBox} error=${list.error} />
    <p class="status" aria-live="polite" id="runtimes-status">${list.loading ? 'Loading…' : `${list.data?.totalCount ?? 0} runtimes; page ${page} of ${pages}`}
      <span class="refresh" data-paused=${editing ? 'true' : 'false'}>${editing ? ' · refresh paused while the filter is edited (Filter applies it, Clear drops it)' : ` · refreshes every ${REFRESH_MS / 1000} s`}</span></p>
    <div class="scroll"><table class="runtimes" aria-describedby="runtimes-status">
      <thead><tr>${COLUMNS.map(([k, label]) => html`<th scope="col" data-sort=${k} aria-sort=${sort.sort === k ? (sort.order === 'asc' ? 'ascending' : 'descending') : 'none'}>
        <button type="button" class="sort" onClick=${() => sortBy(k)}>${label}<span aria-hidden="true">${sort.sort === k ? (sort.order === 'asc' ? ' ▲' : ' ▼') : ''}</span></button></th>`)}</tr></thead>
      <tbody>${rows.map((r) => html`<tr data-instance=${r.instanceID}>
        <td data-label="Instance"><${Link} to=${`/instances/${encodeURIComponent(r.instanceID)}`}>${r.instanceID}<//></td>
        <td data-label="Account">${r.globalAccountID}</td><td data-label="Subaccount">${r.subAccountID}</td>
        <td data-label="Plan">${r.servicePlanName}</td><td data-label="Region">${r.region}</td>
        <td data-label="State"><${Badge} state=${r.status.state} /></td><td data-label="Created">${time(r.status.createdAt)}</td></tr>`)}</tbody>
    </table></div>
    <${Pager} page=${page} pages=${pages} go=${go} />`;
}

// --- one instance -------------------------------------------------------------------------

const inProgress = (op) => op && ['in progress', 'pending', 'retrying'].includes(op.state);

function Step({ r, pct, width, t0 }) {
  const meta = r.skipped ? 'skipped'
    : `${r.attempts} run${r.attempts === 1 ? '' : 's'}, ${formatDuration(r.duration)}, from +${formatDuration(r.firstStart - t0)}${r.current ? ' · running now' : ''}`;
  return html`<li class=${`step${r.failed ? ' failed' : ''}${r.skipped ? ' skipped' : ''}${r.current ? ' current' : ''}`} data-step=${r.step} data-stage=${r.stage}>
    <div class="step-head"><span class="step-name">${r.step}</span><span class="step-meta">${meta}</span></div>
    <div class="track" aria-hidden="true">
      ${r.waits.map((w) => html`<span class="wait" style=${{ left: pct(w.start), width: width(w.start, w.end) }} title=${`waiting ${formatDuration(w.end - w.start)}: ${w.message}`}></span>`)}
      ${r.runs.map((x) => html`<span class=${`bar ${x.outcome}`} style=${{ left: pct(x.start), width: width(x.start, x.end) }} title=${`${x.outcome} after ${formatDuration(x.end - x.start)}`}></span>`)}
    </div>
    ${r.message && html`<p class=${r.failed ? 'step-message failure' : 'step-message'}>${r.failed ? 'Failed: ' : r.skipped ? 'Skipped: ' : 'Last retry: '}${r.message}</p>`}
  </li>`;
}

// Timeline: the steps grouped in bands by stage (consecutive steps of one stage share a band).
function Timeline({ events, op }) {
  const { rows, t0, span } = buildTimeline(events, op);
  if (!rows.length) return html`<p class="muted">No step has run yet.</p>`;
  const pct = (t) => `${(((t - t0) / span) * 100).toFixed(2)}%`;
  const width = (a, b) => `${Math.max(((b - a) / span) * 100, 0.4).toFixed(2)}%`;
  return html`<ol class="timeline" aria-label="Steps by stage">${stageGroups(rows).map((g) => html`
    <li class="stage" data-stage=${g.stage}><span class="stage-name">${g.stage ? `Stage ${g.stage}` : 'Stage not recorded'}</span>
      <ol class="steps" aria-label=${`Steps of stage ${g.stage || 'not recorded'}`}>${g.rows.map((r) => html`<${Step} r=${r} pct=${pct} width=${width} t0=${t0} />`)}</ol></li>`)}
  </ol>`;
}

// AgentConnection shows the Runtime Agent's connection: its status and, when disconnected, why
// and the remedy (the errors name reconnectRuntimeAgent).
function AgentConnection({ conn }) {
  if (conn.error) return html`<span class="muted">unknown (${conn.error.message})</span>`;
  const row = conn.data?.data?.[0];
  if (!row) return conn.loading ? 'Loading…' : '—';
  if (row.configError) return html`<span class="muted">unknown (${row.configError})</span>`;
  const cs = row.runtimeConnectionStatus;
  if (!cs) return '—';
  const state = { Connected: 'succeeded', Disconnected: 'failed', Pending: 'pending' }[cs.status] || 'unknown';
  return html`<span class=${`badge state-${state}`} data-status=${cs.status}>${cs.status}</span>
    ${(cs.errors || []).map((e) => html`<p class="step-message failure">${e}</p>`)}`;
}

function Instance({ id }) {
  const rt = useAPI(() => get(`/runtimes${query({ instance_id: id, op_detail: 'all' })}`), [id], (d) => d.data?.some((r) => (r.status.operations || []).some(inProgress)));
  const runtime = rt.data?.data?.[0];
  const live = runtime && (runtime.status.operations || []).some(inProgress);
  const ev = useAPI(() => get(`/events${query({ instance_ids: id })}`), [id, live], () => live);
  // The Runtime Agent's connection (the provisioner's runtimeConnectionStatus, which follows the
  // agent's report in the Director): asked apart, so a broker without a provisioner still shows the rest.
  const conn = useAPI(() => (runtime?.runtimeID ? get(`/runtimes${query({ instance_id: id, connection_status: 'true' })}`) : Promise.resolve(null)), [id, runtime?.runtimeID, live]);
  if (rt.error) return html`<h1>Instance ${id}</h1><${ErrorBox} error=${rt.error} />`;
  if (!runtime) return html`<h1>Instance ${id}</h1><p>${rt.loading ? 'Loading…' : 'No such instance.'}</p>`;
  const ops = runtime.status.operations || [];
  const events = ev.data || [];
  return html`<h1>Instance <span class="mono">${id}</span> <${Badge} state=${runtime.status.state} /></h1>
    <section class="cards">
      <div class="card"><h2>Runtime</h2><dl>
        <dt>Runtime ID</dt><dd class="mono">${runtime.runtimeID || '—'}</dd>
        <dt>Plan</dt><dd>${runtime.servicePlanName}</dd><dt>Region</dt><dd>${runtime.region}</dd>
        <dt>Dashboard</dt><dd>${runtime.dashboardURL ? html`<a href=${runtime.dashboardURL} rel="noopener noreferrer" target="_blank">${runtime.dashboardURL}</a>` : '—'}</dd>
        <dt>Runtime Agent</dt><dd class="agent-connection"><${AgentConnection} conn=${conn} /></dd>
        <dt>Kubeconfig</dt><dd>${runtime.runtimeID ? html`<a href=${`/kubeconfig/${encodeURIComponent(id)}`} download=${`kubeconfig-${id}.yaml`}>download</a>` : '—'}</dd>
        ${runtime.expiresAt && html`<dt>Expires</dt><dd>${time(runtime.expiresAt)}</dd>`}
        ${runtime.expiredAt && html`<dt>Expired</dt><dd>${time(runtime.expiredAt)}</dd>`}
      </dl></div>
      <div class="card"><h2>Context</h2><dl>
        <dt>Global account</dt><dd class="mono">${runtime.globalAccountID}</dd>
        <dt>Subaccount</dt><dd class="mono">${runtime.subAccountID}</dd>
        <dt>Service plan ID</dt><dd class="mono">${runtime.servicePlanID}</dd>
        <dt>Created</dt><dd>${time(runtime.status.createdAt)}</dd><dt>Modified</dt><dd>${time(runtime.status.modifiedAt)}</dd>
      </dl></div>
      <div class="card"><h2>Parameters</h2><${JSONBlock} value=${runtime.parameters} /></div>
    </section>
    <h2>Operations ${live && html`<span class="live" aria-live="polite">updating live</span>`}</h2>
    <${ErrorBox} error=${ev.error} />
    ${ops.map((op) => html`<section class="operation" data-operation=${op.operationID} aria-label=${`${op.type} operation`}>
      <h3>${op.type} <${Badge} state=${op.state} /> <span class="mono muted">${op.operationID}</span></h3>
      <p class="muted">${time(op.createdAt)} → ${time(op.updatedAt)}${op.description ? html` · <span class="op-description">${op.description}</span>` : ''}</p>
      ${inProgress(op) && op.currentStep && html`<p class="current-step">Now: stage <strong>${op.stage}</strong>, step <strong>${op.currentStep}</strong> (run ${op.currentStepAttempts})</p>`}
      <${Timeline} events=${events.filter((e) => e.operation_id === op.operationID)} op=${op} />
    </section>`)}`;
}

// --- orchestrations -----------------------------------------------------------------------

function progress(stats = {}) {
  const total = Object.values(stats).reduce((a, b) => a + b, 0);
  // skipped: the runtime was deprovisioned before its turn; done, and not a failure.
  const done = (stats.succeeded || 0) + (stats.failed || 0) + (stats.skipped || 0) + (stats.canceled || 0);
  return { total, done, pct: total ? Math.round((done / total) * 100) : 100 };
}

function Progress({ stats }) {
  const { total, pct } = progress(stats);
  const seg = (k) => (total ? `${((stats[k] || 0) / total) * 100}%` : '0%');
  return html`<div class="progress" role="progressbar" aria-valuemin="0" aria-valuemax="100" aria-valuenow=${pct} aria-label="Progress">
    <span class="seg succeeded" style=${{ width: seg('succeeded') }}></span><span class="seg failed" style=${{ width: seg('failed') }}></span>
    <span class="seg skipped" style=${{ width: seg('skipped') }}></span><span class="seg canceled" style=${{ width: seg('canceled') }}></span><span class="seg running" style=${{ width: seg('in progress') }}></span>
  </div><span class="pct">${pct}%</span>
  <span class="muted small">${['succeeded', 'failed', 'skipped', 'in progress', 'pending', 'retrying', 'canceled'].filter((k) => stats[k]).map((k) => `${stats[k]} ${k}`).join(' · ')}</span>`;
}

// A dry run upgrades nothing: its operations are stored "succeeded" with "dry run: not
// upgraded", so its stats would read "succeeded 100%". It is shown as what it is instead.
const isDryRun = (o) => Boolean(o?.parameters?.dryRun);
const DryRunBadge = () => html`<span class="badge dry-run" title="a dry run: nothing was upgraded">dry run</span>`;

function target(o) {
  const p = o.parameters || {};
  if (p.kyma?.version) return `Kyma ${p.kyma.version}`;
  const k = p.kubernetes || {};
  return [k.kubernetesVersion && `Kubernetes ${k.kubernetesVersion}`, k.machineImageVersion && `machine image ${k.machineImageVersion}`].filter(Boolean).join(', ') || o.type;
}

const wouldTouch = (o) => Object.values(o.operationStats || {}).reduce((a, b) => a + b, 0);

function Orchestrations({ params }) {
  const { page, pageSize } = pageParams(params, 50);
  const list = useAPI(() => getPage(`/orchestrations`, page, pageSize), [page, pageSize], (d) => d.data.some((o) => !FINAL_ORCH.includes(o.state)));
  const rows = list.data?.data || [];
  const total = list.data?.totalCount || 0;
  const pages = Math.max(1, Math.ceil(total / pageSize));
  const go = (p) => navigate('/orchestrations', { ...params, page: p });
  return html`<h1>Orchestrations</h1><${ErrorBox} error=${list.error} />
    ${list.data && html`<${PageNotice} data=${list.data} shown=${rows.length} total=${total} what="orchestrations" />`}
    <div class="scroll"><table class="orchestrations"><thead><tr><th scope="col">Orchestration</th><th scope="col">Type</th><th scope="col">State</th><th scope="col">Progress</th><th scope="col">Created</th></tr></thead>
    <tbody>${rows.map((o) => html`<tr data-orchestration=${o.orchestrationID} data-dry-run=${isDryRun(o) ? 'true' : undefined}>
      <td data-label="Orchestration"><${Link} to=${`/orchestrations/${o.orchestrationID}`}>${o.orchestrationID}<//></td><td data-label="Type">${o.type}</td>
      ${isDryRun(o)
        ? html`<td data-label="State"><${DryRunBadge} /></td><td data-label="Progress" class="dry-run-summary">nothing upgraded; would upgrade ${num(wouldTouch(o))} runtimes to ${target(o)}</td>`
        : html`<td data-label="State"><${Badge} state=${o.state} /></td><td data-label="Progress" class="progress-cell"><${Progress} stats=${o.operationStats} /></td>`}
      <td data-label="Created">${time(o.createdAt)}</td></tr>`)}
    </tbody></table></div>
    ${list.data && !rows.length && page === 1 && html`<p class="muted">No orchestrations. Create one with <code>kcp upgrade kyma</code> or POST /upgrade/kyma.</p>`}
    ${pages > 1 && html`<${Pager} page=${page} pages=${pages} go=${go} />`}`;
}

function Confirm({ label, question, onConfirm, disabled }) {
  const [asking, setAsking] = useState(false);
  if (!asking) return html`<button type="button" disabled=${disabled} onClick=${() => setAsking(true)}>${label}</button>`;
  return html`<span class="confirm" role="group" aria-label=${question}><span>${question}</span>
    <button type="button" class="danger" autofocus onClick=${() => { setAsking(false); onConfirm(); }}>Yes, ${label.toLowerCase()}</button>
    <button type="button" class="secondary" onClick=${() => setAsking(false)}>No</button></span>`;
}

function Orchestration({ id, params }) {
  const [tick, setTick] = useState(0);
  const [msg, setMsg] = useState(null);
  const { page, pageSize } = pageParams(params, 100);
  const orch = useAPI(() => get(`/orchestrations/${encodeURIComponent(id)}`), [id, tick], (o) => !FINAL_ORCH.includes(o.state));
  const ops = useAPI(() => getPage(`/orchestrations/${encodeURIComponent(id)}/operations`, page, pageSize), [id, tick, orch.data?.updatedAt, page, pageSize]);
  const act = async (what) => {
    try {
      const res = await put(`/orchestrations/${encodeURIComponent(id)}/${what}`);
      setMsg({ ok: true, text: what === 'cancel' ? `Canceled ${res.canceled} pending operations; state ${res.state}.` : res.message || 'Retrying.' });
    } catch (error) {
      setMsg({ ok: false, text: error.message });
    }
    setTick((t) => t + 1);
  };
  const o = orch.data;
  if (!o) return html`<h1>Orchestration ${id}</h1><${ErrorBox} error=${orch.error} />${orch.loading && html`<p>Loading…</p>`}`;
  const dry = isDryRun(o);
  const rows = ops.data?.data || [];
  const total = ops.data?.totalCount || 0;
  const pages = Math.max(1, Math.ceil(total / pageSize));
  const go = (p) => navigate(`/orchestrations/${encodeURIComponent(id)}`, { ...params, page: p });
  const runtimeCell = (r) => html`<td data-label="Runtime" class="mono">${r.runtimeID}</td>`;
  return html`<h1>Orchestration <span class="mono">${id}</span> ${dry ? html`<${DryRunBadge} />` : html`<${Badge} state=${o.state} />`}</h1>
    <p>${o.type} · created ${time(o.createdAt)} · ${o.description}</p>
    ${dry ? html`<p class="dry-run-summary" role="note"><strong>Dry run: nothing was upgraded.</strong> ${num(wouldTouch(o))} runtimes would be upgraded to ${target(o)}; they are listed below. To upgrade them, create the orchestration again without <code>dryRun</code>.</p>`
      : html`<div class="orch-progress"><${Progress} stats=${o.operationStats} /></div>
    <div class="actions">
      <${Confirm} label="Cancel" question="Cancel this orchestration? Pending upgrades will not start." disabled=${FINAL_ORCH.includes(o.state) || o.state === 'canceling'} onConfirm=${() => act('cancel')} />
      <${Confirm} label="Retry" question="Retry every failed operation?" disabled=${!(o.operationStats?.failed > 0)} onConfirm=${() => act('retry')} />
    </div>`}
    ${msg && html`<p class=${msg.ok ? 'notice' : 'error'} role="status">${msg.text}</p>`}
    <details><summary>Parameters</summary><${JSONBlock} value=${o.parameters} /></details>
    <h2>${dry ? 'Runtimes it would upgrade' : 'Operations'}</h2><${ErrorBox} error=${ops.error} />
    ${ops.data && html`<${PageNotice} data=${ops.data} shown=${rows.length} total=${total} what=${dry ? 'runtimes' : 'operations'} />`}
    <div class="scroll"><table class="orchestration-operations"><thead><tr><th scope="col">Instance</th><th scope="col">Runtime</th><th scope="col">Account</th><th scope="col">Plan</th><th scope="col">Region</th>${!dry && html`<th scope="col">State</th><th scope="col">Description</th>`}</tr></thead>
    <tbody>${rows.map((r) => html`<tr data-operation=${r.operationID} data-runtime=${r.runtimeID}>
      <td data-label="Instance"><${Link} to=${`/instances/${encodeURIComponent(r.instanceID)}`}>${r.instanceID}<//></td>${runtimeCell(r)}<td data-label="Account">${r.globalAccountID}</td>
      <td data-label="Plan">${r.servicePlanName}</td><td data-label="Region">${r.region}</td>
      ${!dry && html`<td data-label="State"><${Badge} state=${r.state} /></td><td data-label="Description">${r.description}</td>`}</tr>`)}</tbody></table></div>
    ${pages > 1 && html`<${Pager} page=${page} pages=${pages} go=${go} label="Pages of operations" />`}`;
}

// --- events -------------------------------------------------------------------------------

const EVENT_TYPES = ['retrying', 'succeeded', 'failed', 'skipped', 'started'];
const FEED_PAGE = 100;
const FEED_KEEP = 500;

// The feed asks the API to collapse repeats (collapse=true): a step retrying 78 times is one
// entry "×78", so one stuck instance does not push the rest of the fleet off the page. An
// entry's id is its newest event's, first_id its oldest's.
const sameRetry = (a, b) => a && b && a.type === 'retrying' && b.type === 'retrying' && a.operation_id === b.operation_id && a.step === b.step && a.stage === b.stage;
const times = (e) => e.repeats || 1;

// addNewer puts newer entries (oldest first, as the API gives them after a cursor) on top of
// events (newest first); a retry that continues the newest entry of its operation joins it.
function addNewer(events, newer) {
  let out = events;
  for (const e of newer) {
    const i = out.findIndex((x) => x.operation_id === e.operation_id);
    if (i >= 0 && sameRetry(out[i], e)) {
      const g = out[i];
      const joined = { ...e, repeats: times(g) + times(e), first_id: g.first_id || g.id, first_at: g.first_at || g.created_at };
      out = [joined, ...out.slice(0, i), ...out.slice(i + 1)];
    } else {
      out = [e, ...out];
    }
  }
  return out;
}

// addOlder appends an older page (newest first); a retry that continues the oldest entry of
// its operation shown joins it.
function addOlder(events, older) {
  const out = [...events];
  for (const e of older) {
    let j = -1;
    for (let k = out.length - 1; k >= 0; k--) if (out[k].operation_id === e.operation_id) { j = k; break; }
    if (j >= 0 && sameRetry(out[j], e)) {
      out[j] = { ...out[j], repeats: times(out[j]) + times(e), first_id: e.first_id || e.id, first_at: e.first_at || e.created_at };
    } else {
      out.push(e);
    }
  }
  return out;
}

// useFeed reads the fleet-wide event feed: the newest page, then every POLL_MS the events after
// the newest shown (the API gives those oldest first, so none is missed); older pages on demand.
// A hidden tab does not poll; shown again, it catches up at once.
function useFeed(filter) {
  const [state, setState] = useState({ events: [], error: null, loading: true, more: false });
  const key = JSON.stringify(filter);
  const older = useRef(null);
  useEffect(() => {
    let alive = true;
    let timer = null;
    let events = [];
    let newest = 0; // the cursor forward: the highest event id read
    const oldest = () => Math.min(...events.map((e) => e.first_id || e.id)); // the cursor back
    const set = (patch) => alive && setState((s) => ({ ...s, ...patch }));
    const later = () => { if (alive) timer = setTimeout(poll, POLL_MS); };
    const poll = async () => {
      timer = null;
      if (document.hidden) { later(); return; }
      try {
        for (;;) {
          const newer = await get(`/events${query({ ...filter, after_id: newest || undefined, page_size: 1000, collapse: true })}`);
          if (!alive) return;
          if (newer.length) {
            newest = Math.max(newest, ...newer.map((e) => e.id));
            events = addNewer(events, newer).slice(0, FEED_KEEP);
            set({ events, error: null });
          }
          if (newer.length < 1000) break;
        }
      } catch (error) {
        set({ error });
      }
      later();
    };
    const onVisible = () => { if (!document.hidden && timer !== null) { clearTimeout(timer); poll(); } };
    document.addEventListener('visibilitychange', onVisible);
    (async () => {
      try {
        events = await get(`/events${query({ ...filter, page_size: FEED_PAGE, collapse: true })}`);
        newest = Math.max(0, ...events.map((e) => e.id));
        set({ events, error: null, loading: false, more: events.length === FEED_PAGE });
      } catch (error) {
        set({ error, loading: false });
      }
      later();
    })();
    older.current = async () => {
      if (!events.length) return;
      try {
        const page = await get(`/events${query({ ...filter, before_id: oldest(), page_size: FEED_PAGE, collapse: true })}`);
        events = addOlder(events, page);
        set({ events, more: page.length === FEED_PAGE });
      } catch (error) {
        set({ error });
      }
    };
    return () => { alive = false; clearTimeout(timer); document.removeEventListener('visibilitychange', onVisible); };
  }, [key]);
  return { ...state, older: () => older.current && older.current() };
}

// inTime says how far t is from now ("in 14 s", "3 s ago"), in whole seconds.
function inTime(t, now) {
  const secs = Math.round((new Date(t) - now) / 1000);
  const a = Math.abs(secs);
  if (a === 0) return 'now';
  const span = a < 60 ? `${a} s` : a < 3600 ? `${Math.floor(a / 60)} min ${a % 60} s` : `${Math.floor(a / 3600)} h ${Math.floor((a % 3600) / 60)} min`;
  return secs > 0 ? `in ${span}` : `${span} ago`;
}

// clock is t's time of day, UTC ("12:03:10"), beside the date-and-time the feed shows.
const clock = (t) => new Date(t).toISOString().slice(11, 19);

// RetryTimes says when the engine tries the step again (after its interval, or when an open
// circuit lets a probe through: the API's next_try_at, not the step's interval) and when the
// step gives up if it still fails.
function RetryTimes({ e, now }) {
  if (!e.next_try_at && !e.gives_up_at) return null;
  const next = e.next_try_at && (new Date(e.next_try_at) >= now ? `next try ${inTime(e.next_try_at, now)}` : `next try was due ${inTime(e.next_try_at, now)}`);
  return html`<div class="retry-times">
    ${next && html`<span class="next-try" title=${time(e.next_try_at)}>${next}</span>`}${next && e.gives_up_at && ', '}
    ${e.gives_up_at && html`<span class="gives-up" title=${time(e.gives_up_at)}>gives up at <time datetime=${e.gives_up_at}>${clock(e.gives_up_at)}</time> UTC (${inTime(e.gives_up_at, now)}) if it still fails</span>`}
  </div>`;
}

function Event({ e, now }) {
  const n = times(e);
  return html`<li class=${`event ${e.type}`} data-event=${e.id} data-instance=${e.instance_id} data-runtime=${e.runtime_id || undefined} data-origin=${e.origin || undefined} data-repeats=${n}>
    <time datetime=${e.created_at}>${time(e.created_at)}</time> <${Badge} state=${e.type} /> <strong>${e.step || 'operation'}</strong>
    ${n > 1 && html` <span class="repeats" title=${`${n} consecutive retries of this step, the first at ${time(e.first_at)}`}>×${n}</span>`}
    ${e.stage && html` <span class="event-stage">${e.stage}</span>`}
    ${e.duration_ms ? ` ${formatDuration(e.duration_ms)}` : ''}
    ${n > 1 && html`<span class="muted small"> since ${time(e.first_at)}</span>`}
    <${RetryTimes} e=${e} now=${now} />
    <div class="event-ids muted">instance <${Link} class="instance-link" to=${`/instances/${encodeURIComponent(e.instance_id)}`}>${e.instance_id}<//>${' · '}runtime <span class="mono runtime-id">${e.runtime_id || '—'}</span>${' · '}operation <span class="mono">${e.operation_id}</span>${e.origin && html` <span class="badge origin">${e.origin}</span>`}</div>
    ${e.message && html`<div class="event-message">${e.message}</div>`}</li>`;
}

// useNow re-renders every second (the feed's relative times count down).
function useNow() {
  const [now, setNow] = useState(() => new Date());
  useEffect(() => {
    const timer = setInterval(() => setNow(new Date()), 1000);
    return () => clearInterval(timer);
  }, []);
  return now;
}

function Events({ params }) {
  const [form, setForm] = useState(params);
  useEffect(() => setForm(params), [JSON.stringify(params)]);
  const set = (k, v) => setForm((f) => ({ ...f, [k]: v }));
  const feed = useFeed({ instance_ids: params.instance, operation_ids: params.operation, type: params.type, stage: params.stage });
  const { events } = feed;
  const now = useNow();
  return html`<h1>Events</h1>
    <form class="filters" role="search" aria-label="Filter events" onSubmit=${(e) => { e.preventDefault(); navigate('/events', form); }}>
      <${Field} label="Instance ID" name="instance" value=${form.instance || ''} onInput=${set} />
      <${Field} label="Operation ID" name="operation" value=${form.operation || ''} onInput=${set} />
      <${Field} label="Type" name="type" value=${form.type || ''} onInput=${set}><option value="">any</option>${EVENT_TYPES.map((t) => html`<option value=${t}>${t}</option>`)}<//>
      <${Field} label="Stage" name="stage" value=${form.stage || ''} onInput=${set} />
      <div class="buttons"><button type="submit">Filter</button>
        <button type="button" class="secondary" onClick=${() => { setForm({}); navigate('/events'); }}>Clear</button></div>
    </form>
    <${ErrorBox} error=${feed.error} />
    <p class="status" aria-live="polite">${feed.loading ? 'Loading…' : `${events.length} entries of the fleet, newest first (a step's repeated retries are one entry, ×N); updating live`}</p>
    <ol class="feed">${events.map((e) => html`<${Event} e=${e} now=${now} key=${e.id} />`)}</ol>
    ${feed.more && html`<button type="button" class="secondary" onClick=${feed.older}>Older events</button>`}`;
}

// --- shell --------------------------------------------------------------------------------

function App() {
  const [route, setRoute] = useState(parseHash());
  useEffect(() => {
    const on = () => { setRoute(parseHash()); window.scrollTo(0, 0); };
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  const [section, id] = route.parts;
  let page;
  if (section === 'instances' && id) page = html`<${Instance} id=${id} key=${id} />`;
  else if (section === 'orchestrations' && id) page = html`<${Orchestration} id=${id} key=${id} params=${route.params} />`;
  else if (section === 'orchestrations') page = html`<${Orchestrations} params=${route.params} />`;
  else if (section === 'events') page = html`<${Events} params=${route.params} />`;
  else page = html`<${Runtimes} params=${route.params} />`;
  const nav = [['runtimes', 'Runtimes'], ['orchestrations', 'Orchestrations'], ['events', 'Events']];
  const current = section === 'instances' ? 'runtimes' : section || 'runtimes';
  return html`<header class="top"><a class="brand" href="#/runtimes">KEB console</a>
      <nav aria-label="Sections"><ul>${nav.map(([k, label]) => html`<li><a href=${`#/${k}`} aria-current=${current === k ? 'page' : undefined}>${label}</a></li>`)}</ul></nav></header>
    <main id="main" tabindex="-1">${page}</main>`;
}

// The loading message is replaced, not diffed against.
const root = document.getElementById('app');
root.textContent = '';
render(html`<${App} />`, root);
