// The operator console: a hash-routed Preact app (htm templates, no build step) over the
// public operator API.
import { html, render, useState, useEffect, useCallback, useRef } from './vendor/preact-htm.js';
import { get, put, query } from './api.js';
import { buildTimeline, stageGroups, formatDuration } from './timeline.js';

const STATES = ['provisioning', 'provisioned', 'failed', 'updating', 'upgrading', 'deprovisioning', 'deprovisioned', 'suspended', 'expired'];
const FINAL_ORCH = ['succeeded', 'failed', 'canceled'];
const POLL_MS = 1000;

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

// useAPI loads fn() when deps change and, while poll() says so, every POLL_MS again (an
// operation in progress updates live).
function useAPI(fn, deps, poll) {
  const [state, setState] = useState({ data: null, error: null, loading: true });
  const pollRef = useRef(poll);
  pollRef.current = poll;
  const load = useCallback(fn, deps);
  useEffect(() => {
    let alive = true;
    let timer = null;
    const run = async () => {
      try {
        const data = await load();
        if (!alive) return;
        setState({ data, error: null, loading: false });
        if (pollRef.current && pollRef.current(data)) timer = setTimeout(run, POLL_MS);
      } catch (error) {
        if (alive) setState((s) => ({ ...s, error, loading: false }));
      }
    };
    setState((s) => ({ ...s, loading: true }));
    run();
    return () => { alive = false; clearTimeout(timer); };
  }, [load]);
  return state;
}

// --- small components -------------------------------------------------------------------

const Badge = ({ state }) => html`<span class=${`badge state-${(state || 'unknown').replace(/\s+/g, '-')}`}>${state || 'unknown'}</span>`;
const ErrorBox = ({ error }) => error && html`<p class="error" role="alert">${error.message}</p>`;
const time = (t) => (t ? new Date(t).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '');
const Link = ({ to, children, ...rest }) => html`<a href=${`#${to}`} ...${rest}>${children}</a>`;
const JSONBlock = ({ value }) => html`<pre class="json">${JSON.stringify(value ?? {}, null, 2)}</pre>`;

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

function Runtimes({ params }) {
  const [form, setForm] = useState(params);
  useEffect(() => setForm(params), [JSON.stringify(params)]);
  const sort = { sort: params.sort || DEFAULT_SORT.sort, order: params.order || (params.sort ? 'asc' : DEFAULT_SORT.order) };
  const page = Number(params.page || 1);
  const pageSize = Number(params.page_size || 50);
  const info = useAPI(() => get('/info/runtimes'), []);
  const list = useAPI(async () => {
    const base = { account: params.account, subaccount: params.subaccount, plan: params.plan, region: params.region, state: params.state, ...sort, page, page_size: pageSize };
    if (!params.id) return get(`/runtimes${query(base)}`);
    // The search box takes an instance or a runtime ID.
    const byInstance = await get(`/runtimes${query({ ...base, instance_id: params.id })}`);
    return byInstance.totalCount ? byInstance : get(`/runtimes${query({ ...base, runtime_id: params.id })}`);
  }, [JSON.stringify(params)]);
  const set = (k, v) => setForm((f) => ({ ...f, [k]: v }));
  const submit = (e) => { e.preventDefault(); navigate('/runtimes', { ...form, page: '' }); };
  const rows = list.data?.data || [];
  const sortBy = (k) => navigate('/runtimes', { ...params, page: '', sort: k, order: sort.sort === k && sort.order === 'asc' ? 'desc' : 'asc' });
  const pages = Math.max(1, Math.ceil((list.data?.totalCount || 0) / pageSize));
  const go = (p) => navigate('/runtimes', { ...params, page: p });
  return html`<h1>Runtimes</h1>
    <${Counts} info=${info.data} /><${ErrorBox} error=${info.error} />
    <form class="filters" role="search" aria-label="Filter runtimes" onSubmit=${submit}>
      <${Field} label="Instance or runtime ID" name="id" value=${form.id || ''} onInput=${set} />
      <${Field} label="Global account" name="account" value=${form.account || ''} onInput=${set} />
      <${Field} label="Subaccount" name="subaccount" value=${form.subaccount || ''} onInput=${set} />
      <${Field} label="Plan" name="plan" value=${form.plan || ''} onInput=${set} />
      <${Field} label="Region" name="region" value=${form.region || ''} onInput=${set} />
      <${Field} label="State" name="state" value=${form.state || ''} onInput=${set}>
        <option value="">any (live)</option>${STATES.map((s) => html`<option value=${s}>${s}</option>`)}
      <//>
      <div class="buttons"><button type="submit">Filter</button>
        <button type="button" class="secondary" onClick=${() => navigate('/runtimes')}>Clear</button></div>
    </form>
    <${ErrorBox} error=${list.error} />
    <p class="status" aria-live="polite" id="runtimes-status">${list.loading ? 'Loading…' : `${list.data?.totalCount ?? 0} runtimes; page ${page} of ${pages}`}</p>
    <div class="scroll"><table class="runtimes" aria-describedby="runtimes-status">
      <thead><tr>${COLUMNS.map(([k, label]) => html`<th scope="col" data-sort=${k} aria-sort=${sort.sort === k ? (sort.order === 'asc' ? 'ascending' : 'descending') : 'none'}>
        <button type="button" class="sort" onClick=${() => sortBy(k)}>${label}<span aria-hidden="true">${sort.sort === k ? (sort.order === 'asc' ? ' ▲' : ' ▼') : ''}</span></button></th>`)}</tr></thead>
      <tbody>${rows.map((r) => html`<tr data-instance=${r.instanceID}>
        <td data-label="Instance"><${Link} to=${`/instances/${encodeURIComponent(r.instanceID)}`}>${r.instanceID}<//></td>
        <td data-label="Account">${r.globalAccountID}</td><td data-label="Subaccount">${r.subAccountID}</td>
        <td data-label="Plan">${r.servicePlanName}</td><td data-label="Region">${r.region}</td>
        <td data-label="State"><${Badge} state=${r.status.state} /></td><td data-label="Created">${time(r.status.createdAt)}</td></tr>`)}</tbody>
    </table></div>
    <nav class="pager" aria-label="Pages">
      <button type="button" disabled=${page <= 1} onClick=${() => go(page - 1)}>Previous</button>
      <span>Page ${page} of ${pages}</span>
      <button type="button" disabled=${page >= pages} onClick=${() => go(page + 1)}>Next</button>
    </nav>`;
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

function Orchestrations() {
  const list = useAPI(() => get('/orchestrations?page_size=100'), [], (d) => d.data.some((o) => !FINAL_ORCH.includes(o.state)));
  return html`<h1>Orchestrations</h1><${ErrorBox} error=${list.error} />
    <div class="scroll"><table><thead><tr><th scope="col">Orchestration</th><th scope="col">Type</th><th scope="col">State</th><th scope="col">Progress</th><th scope="col">Created</th></tr></thead>
    <tbody>${(list.data?.data || []).map((o) => html`<tr data-orchestration=${o.orchestrationID}>
      <td data-label="Orchestration"><${Link} to=${`/orchestrations/${o.orchestrationID}`}>${o.orchestrationID}<//></td><td data-label="Type">${o.type}</td>
      <td data-label="State"><${Badge} state=${o.state} /></td><td data-label="Progress" class="progress-cell"><${Progress} stats=${o.operationStats} /></td><td data-label="Created">${time(o.createdAt)}</td></tr>`)}
    </tbody></table></div>
    ${list.data && !list.data.data.length && html`<p class="muted">No orchestrations. Create one with <code>kcp upgrade kyma</code> or POST /upgrade/kyma.</p>`}`;
}

function Confirm({ label, question, onConfirm, disabled }) {
  const [asking, setAsking] = useState(false);
  if (!asking) return html`<button type="button" disabled=${disabled} onClick=${() => setAsking(true)}>${label}</button>`;
  return html`<span class="confirm" role="group" aria-label=${question}><span>${question}</span>
    <button type="button" class="danger" autofocus onClick=${() => { setAsking(false); onConfirm(); }}>Yes, ${label.toLowerCase()}</button>
    <button type="button" class="secondary" onClick=${() => setAsking(false)}>No</button></span>`;
}

function Orchestration({ id }) {
  const [tick, setTick] = useState(0);
  const [msg, setMsg] = useState(null);
  const orch = useAPI(() => get(`/orchestrations/${encodeURIComponent(id)}`), [id, tick], (o) => !FINAL_ORCH.includes(o.state));
  const ops = useAPI(() => get(`/orchestrations/${encodeURIComponent(id)}/operations?page_size=1000`), [id, tick, orch.data?.updatedAt]);
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
  return html`<h1>Orchestration <span class="mono">${id}</span> <${Badge} state=${o.state} /></h1>
    <p>${o.type} · created ${time(o.createdAt)} · ${o.description}</p>
    <div class="orch-progress"><${Progress} stats=${o.operationStats} /></div>
    <div class="actions">
      <${Confirm} label="Cancel" question="Cancel this orchestration? Pending upgrades will not start." disabled=${FINAL_ORCH.includes(o.state) || o.state === 'canceling'} onConfirm=${() => act('cancel')} />
      <${Confirm} label="Retry" question="Retry every failed operation?" disabled=${!(o.operationStats?.failed > 0)} onConfirm=${() => act('retry')} />
    </div>
    ${msg && html`<p class=${msg.ok ? 'notice' : 'error'} role="status">${msg.text}</p>`}
    <details><summary>Parameters</summary><${JSONBlock} value=${o.parameters} /></details>
    <h2>Operations</h2><${ErrorBox} error=${ops.error} />
    <div class="scroll"><table><thead><tr><th scope="col">Instance</th><th scope="col">Account</th><th scope="col">Plan</th><th scope="col">Region</th><th scope="col">State</th><th scope="col">Description</th></tr></thead>
    <tbody>${(ops.data?.data || []).map((r) => html`<tr>
      <td data-label="Instance"><${Link} to=${`/instances/${encodeURIComponent(r.instanceID)}`}>${r.instanceID}<//></td><td data-label="Account">${r.globalAccountID}</td>
      <td data-label="Plan">${r.servicePlanName}</td><td data-label="Region">${r.region}</td><td data-label="State"><${Badge} state=${r.state} /></td><td data-label="Description">${r.description}</td></tr>`)}</tbody></table></div>`;
}

// --- events -------------------------------------------------------------------------------

const EVENT_TYPES = ['retrying', 'succeeded', 'failed', 'skipped', 'started'];
const FEED_PAGE = 100;
const FEED_KEEP = 500;

// useFeed reads the fleet-wide event feed: the newest page, then every POLL_MS the events after
// the newest shown (the API gives those oldest first, so none is missed); older pages on demand.
function useFeed(filter) {
  const [state, setState] = useState({ events: [], error: null, loading: true, more: false });
  const key = JSON.stringify(filter);
  const older = useRef(null);
  useEffect(() => {
    let alive = true;
    let timer = null;
    let events = [];
    const set = (patch) => alive && setState((s) => ({ ...s, ...patch }));
    const poll = async () => {
      try {
        for (;;) {
          const newer = await get(`/events${query({ ...filter, after_id: events[0]?.id, page_size: 1000 })}`);
          if (!alive) return;
          if (newer.length) {
            events = [...newer.reverse(), ...events].slice(0, FEED_KEEP);
            set({ events, error: null });
          }
          if (newer.length < 1000) break;
        }
      } catch (error) {
        set({ error });
      }
      if (alive) timer = setTimeout(poll, POLL_MS);
    };
    (async () => {
      try {
        events = await get(`/events${query({ ...filter, page_size: FEED_PAGE })}`);
        set({ events, error: null, loading: false, more: events.length === FEED_PAGE });
      } catch (error) {
        set({ error, loading: false });
      }
      if (alive) timer = setTimeout(poll, POLL_MS);
    })();
    older.current = async () => {
      const last = events[events.length - 1];
      if (!last) return;
      try {
        const page = await get(`/events${query({ ...filter, before_id: last.id, page_size: FEED_PAGE })}`);
        events = [...events, ...page];
        set({ events, more: page.length === FEED_PAGE });
      } catch (error) {
        set({ error });
      }
    };
    return () => { alive = false; clearTimeout(timer); };
  }, [key]);
  return { ...state, older: () => older.current && older.current() };
}

function Events({ params }) {
  const [form, setForm] = useState(params);
  useEffect(() => setForm(params), [JSON.stringify(params)]);
  const set = (k, v) => setForm((f) => ({ ...f, [k]: v }));
  const feed = useFeed({ instance_ids: params.instance, operation_ids: params.operation, type: params.type, stage: params.stage });
  const { events } = feed;
  return html`<h1>Events</h1>
    <form class="filters" role="search" aria-label="Filter events" onSubmit=${(e) => { e.preventDefault(); navigate('/events', form); }}>
      <${Field} label="Instance ID" name="instance" value=${form.instance || ''} onInput=${set} />
      <${Field} label="Operation ID" name="operation" value=${form.operation || ''} onInput=${set} />
      <${Field} label="Type" name="type" value=${form.type || ''} onInput=${set}><option value="">any</option>${EVENT_TYPES.map((t) => html`<option value=${t}>${t}</option>`)}<//>
      <${Field} label="Stage" name="stage" value=${form.stage || ''} onInput=${set} />
      <div class="buttons"><button type="submit">Filter</button>
        <button type="button" class="secondary" onClick=${() => navigate('/events')}>Clear</button></div>
    </form>
    <${ErrorBox} error=${feed.error} />
    <p class="status" aria-live="polite">${feed.loading ? 'Loading…' : `${events.length} events of the fleet, newest first; updating live`}</p>
    <ol class="feed">${events.map((e) => html`<li class=${`event ${e.type}`} data-event=${e.id} data-instance=${e.instance_id}>
      <time datetime=${e.created_at}>${time(e.created_at)}</time> <${Badge} state=${e.type} /> <strong>${e.step || 'operation'}</strong>
      ${e.stage && html` <span class="event-stage">${e.stage}</span>`}
      ${e.duration_ms ? ` ${formatDuration(e.duration_ms)}` : ''}${e.wait_ms ? `, next try in ${formatDuration(e.wait_ms)}` : ''}
      <span class="muted"> · <${Link} to=${`/instances/${encodeURIComponent(e.instance_id)}`}>${e.instance_id}<//> · ${e.operation_id}</span>
      ${e.message && html`<div class="event-message">${e.message}</div>`}</li>`)}</ol>
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
  else if (section === 'orchestrations' && id) page = html`<${Orchestration} id=${id} key=${id} />`;
  else if (section === 'orchestrations') page = html`<${Orchestrations} />`;
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
