// Orbit operator console: one vanilla module, no dependencies.
//
// Every number and action goes through the public /v1 API with the bearer token the operator
// pasted (kept in this tab's sessionStorage only), so the token's scopes decide what the console
// may read and do. Everything shown is built with createElement/textContent: task payloads,
// keys and names are user data and always render as text (nothing is ever parsed as HTML).

const TOKEN_KEY = 'orbit.console.token';
const REFRESH_MS = 2000;
const STATES = ['WAITING', 'LEASED', 'RUNNING', 'RETRY_WAIT', 'SUCCEEDED', 'FAILED', 'CANCELLED',
  'NEEDS_REVIEW', 'EXPIRED'];

// ---------------------------------------------------------------------------------------------
// DOM helpers (text only)

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') {
      node.addEventListener(name.slice(2), value);
    } else if (name === 'class') {
      node.className = value;
    } else if (value === true) {
      node.setAttribute(name, '');
    } else {
      node.setAttribute(name, String(value));
    }
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function link(href, text, attrs) {
  return el('a', Object.assign({ href }, attrs || {}), text);
}

function stateBadge(state) {
  return el('span', { class: 'state ' + String(state) }, state);
}

function when(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

function ago(iso) {
  if (!iso) return '';
  const s = Math.round((Date.now() - new Date(iso).getTime()) / 1000);
  if (Number.isNaN(s)) return '';
  const abs = Math.abs(s);
  const text = abs < 90 ? `${abs} s` : abs < 5400 ? `${Math.round(abs / 60)} min` : `${Math.round(abs / 3600)} h`;
  return s >= 0 ? `${text} ago` : `in ${text}`;
}

function table(headers, rows, attrs) {
  return el('table', attrs || {},
    el('thead', {}, el('tr', {}, headers.map((h) => el('th', { class: h.num ? 'num' : undefined }, h.label || h)))),
    el('tbody', {}, rows.length
      ? rows
      : el('tr', {}, el('td', { colspan: headers.length, class: 'muted' }, 'Nothing here.'))));
}

function row(cells, attrs) {
  return el('tr', attrs || {}, cells.map((c) => (c instanceof Node && c.tagName === 'TD') ? c : el('td', {}, c)));
}

function num(value) {
  return el('td', { class: 'num' }, value);
}

function facts(pairs) {
  return el('dl', { class: 'facts' }, pairs.map(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]));
}

function pretty(value) {
  return JSON.stringify(value, null, 2);
}

function keyHref(ns, key) {
  return `#/key/${encodeURIComponent(String(ns))}/${encodeURIComponent(key)}`;
}

// ---------------------------------------------------------------------------------------------
// The API

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

async function request(method, path, body, accept, bearer) {
  const headers = { Authorization: 'Bearer ' + (bearer || token()) };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: 'no-store',
    credentials: 'omit',
    redirect: 'error',
  });
  if (accept === 'text' && response.ok) return response.text();
  let json = null;
  try {
    json = await response.json();
  } catch (_) {
    json = null;
  }
  if (!response.ok) {
    const error = json && json.error ? json.error : {};
    throw new ApiError(response.status, error.code || String(response.status),
      error.message || `HTTP ${response.status}`);
  }
  return json;
}

const api = {
  get: (path) => request('GET', path),
  post: (path, body) => request('POST', path, body === undefined ? {} : body),
  text: (path) => request('GET', path, undefined, 'text'),
};

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return s ? '?' + s : '';
}

/// Every queue the token reaches (a few pages at most).
async function allQueues() {
  const queues = [];
  let cursor = null;
  for (let page = 0; page < 20; page++) {
    const r = await api.get('/v1/queues' + query({ limit: 500, cursor }));
    queues.push(...r.data);
    cursor = r.next_cursor;
    if (!cursor) break;
  }
  return queues;
}

// ---------------------------------------------------------------------------------------------
// Flash messages and actions

function flash(text, isError) {
  const box = document.getElementById('flash');
  box.replaceChildren(el('div', { class: 'msg' + (isError ? ' error' : ''), id: 'flash-message' }, text));
}

let busy = 0;

/// Runs an action (a POST), shows its outcome, and re-renders the page.
async function act(button, what, fn) {
  busy++;
  if (button) button.disabled = true;
  try {
    await fn();
    flash(what + ': done');
  } catch (e) {
    flash(`${what}: ${e.code ? e.code + ': ' : ''}${e.message}`, true);
    if (e.status === 401) signOut();
  } finally {
    busy--;
    if (button) button.disabled = false;
    await render();
  }
}

// ---------------------------------------------------------------------------------------------
// Pages. Each returns a node; render() swaps it in.

function signInPage() {
  const input = el('input', { type: 'password', id: 'token', autocomplete: 'off', placeholder: 'orbit_…', spellcheck: 'false' });
  const error = el('div', { id: 'signin-error' });
  const form = el('form', {
    class: 'card signin',
    id: 'signin-form',
    onsubmit: async (event) => {
      event.preventDefault();
      const value = input.value.trim();
      if (!value) return;
      try {
        // Checked before it is kept: a refused token is never stored.
        await request('GET', '/v1/queues?limit=1', undefined, undefined, value);
        sessionStorage.setItem(TOKEN_KEY, value);
        input.value = '';
        location.hash = '#/';
        await render();
      } catch (e) {
        error.replaceChildren(el('p', { class: 'error-box' }, `Sign-in failed: ${e.code}: ${e.message}`));
      }
    },
  },
  el('h1', {}, 'Sign in'),
  el('p', {}, 'Paste a bearer token. The console calls the same /v1 API with it, so its scopes decide what you can see and do (tasks:read to look, queues:manage to pause, tasks:submit to cancel or resolve, metrics:read for throughput).'),
  input,
  el('button', { type: 'submit', class: 'primary', id: 'sign-in' }, 'Sign in'),
  el('p', { class: 'note' }, 'The token stays in this browser tab (sessionStorage) and is sent only to this server.'),
  error);
  return form;
}

let throughputSample = null;

async function throughput() {
  try {
    const text = await api.text('/metrics');
    let total = 0;
    for (const line of text.split('\n')) {
      if (line.startsWith('orbit_task_results_total{') || line.startsWith('orbit_task_results_total ')) {
        total += Number(line.slice(line.lastIndexOf(' ') + 1)) || 0;
      }
    }
    const now = Date.now();
    let rate = null;
    if (throughputSample && now > throughputSample.at && total >= throughputSample.total) {
      rate = (total - throughputSample.total) / ((now - throughputSample.at) / 1000);
    }
    if (!throughputSample || now - throughputSample.at > 10000 || rate === null) {
      throughputSample = { at: now, total };
    }
    return { total, rate };
  } catch (e) {
    return { error: e };
  }
}

async function overviewPage() {
  const [queues, tp] = await Promise.all([allQueues(), throughput()]);
  const sum = (f) => queues.reduce((n, q) => n + ((q.counts && q.counts[f]) || 0), 0);
  const card = (label, value, id) => el('div', { class: 'card' }, el('div', { class: 'muted' }, label),
    el('div', { class: 'value', id }, value));
  let tpValue;
  if (tp.error) {
    tpValue = tp.error.status === 403 ? 'needs metrics:read' : 'unavailable';
  } else {
    tpValue = tp.rate === null ? `${tp.total} results` : `${tp.rate.toFixed(1)}/s (${tp.total} results)`;
  }
  const namespaces = [...new Set(queues.map((q) => q.namespace_id))];
  return el('section', { id: 'page-overview' },
    el('h1', {}, 'Overview'),
    el('div', { class: 'cards' },
      card('Queues', queues.length, 'total-queues'),
      card('Waiting', sum('waiting'), 'total-waiting'),
      card('Leased + running', sum('leased') + sum('running'), 'total-active'),
      card('Needs review', sum('needs_review'), 'total-review'),
      card('Worker sessions (max per queue)', Math.max(0, ...queues.map((q) => (q.counts && q.counts.sessions) || 0)), 'total-sessions'),
      card('Throughput (results this server took)', tpValue, 'throughput')),
    el('h2', {}, 'Queues'),
    table(['Queue', 'Namespace', 'Status', { label: 'Waiting', num: 1 }, { label: 'Leased', num: 1 },
      { label: 'Running', num: 1 }, { label: 'Retry wait', num: 1 }, { label: 'Needs review', num: 1 },
      { label: 'Sessions', num: 1 }, { label: 'Workers', num: 1 }],
    queues.map((q) => {
      const c = q.counts || {};
      return row([
        link(`#/queue/${encodeURIComponent(q.id)}`, q.name, { class: 'queue-link' }),
        link(`#/keys?ns=${encodeURIComponent(q.namespace_id)}`, String(q.namespace_id)),
        q.paused ? stateBadge('paused') : 'active',
        num(c.waiting), num(c.leased), num(c.running), num(c.retry_wait), num(c.needs_review),
        num(c.sessions), num(c.workers),
      ], { 'data-queue-id': q.id });
    }), { id: 'queues' }),
    el('p', { class: 'note' }, `Namespaces: ${namespaces.join(', ') || 'none'}. Counts are unfinished tasks; finished tasks are not counted.`));
}

async function queuePage(id, params) {
  const state = params.get('state') || '';
  const key = params.get('key');
  const cursor = params.get('cursor') || '';
  const q = (await api.get(`/v1/queues/${encodeURIComponent(id)}`)).data;
  const list = await api.get('/v1/tasks' + query({
    queue_id: id, state, concurrency_key: key === null ? undefined : key, limit: 50, cursor,
  }));
  const c = q.counts || {};
  const stateSelect = el('select', { id: 'filter-state' },
    el('option', { value: '' }, 'any state'),
    STATES.map((s) => el('option', { value: s, selected: s === state }, s)));
  const keyInput = el('input', { id: 'filter-key', placeholder: 'concurrency key (exact)', value: key || '' });
  const apply = () => {
    const p = new URLSearchParams();
    if (stateSelect.value) p.set('state', stateSelect.value);
    if (keyInput.value) p.set('key', keyInput.value);
    location.hash = `#/queue/${encodeURIComponent(id)}` + (p.toString() ? '?' + p : '');
  };
  const pauseButton = q.paused
    ? el('button', { id: 'resume-queue', class: 'primary', onclick: (e) => act(e.target, 'Resume queue', () => api.post(`/v1/queues/${encodeURIComponent(id)}/resume`)) }, 'Resume queue')
    : el('button', { id: 'pause-queue', class: 'danger', onclick: (e) => act(e.target, 'Pause queue', () => api.post(`/v1/queues/${encodeURIComponent(id)}/pause`)) }, 'Pause queue');
  const next = list.next_cursor
    ? link(`#/queue/${encodeURIComponent(id)}` + query({ state, key: key || undefined, cursor: list.next_cursor }), 'Older tasks →', { id: 'next-page' })
    : null;
  return el('section', { id: 'page-queue' },
    el('h1', {}, 'Queue ', el('span', { id: 'queue-name' }, q.name), ' ',
      el('span', { id: 'queue-status' }, q.paused ? stateBadge('paused') : stateBadge('active'))),
    facts([
      ['id', el('code', {}, q.id)],
      ['namespace', link(`#/keys?ns=${encodeURIComponent(q.namespace_id)}`, String(q.namespace_id))],
      ['queue permits', q.max_active_attempts ? String(q.max_active_attempts) : 'unlimited'],
      ['unfinished', `${c.waiting} waiting · ${c.leased} leased · ${c.running} running · ${c.retry_wait} retry wait · ${c.needs_review} needs review`],
      ['workers', `${c.sessions} sessions · ${c.workers} workers`],
    ]),
    el('div', { class: 'toolbar' }, pauseButton,
      el('span', { class: 'note' }, 'Pausing stops new grants; attempts in flight continue.')),
    el('h2', {}, 'Tasks'),
    el('form', { class: 'toolbar', onsubmit: (e) => { e.preventDefault(); apply(); } },
      stateSelect, keyInput, el('button', { type: 'submit', id: 'apply-filter' }, 'Filter')),
    taskTable(list.data, q.namespace_id),
    next);
}

function taskTable(tasks, ns) {
  return table(['Task', 'State', 'Handler', 'Key', { label: 'Attempts', num: 1 }, 'Created', 'Blocked'],
    tasks.map((t) => row([
      link(`#/task/${t.id}`, `#${t.id}`, { class: 'task-link' }),
      stateBadge(t.state),
      t.handler,
      t.concurrency_key === undefined ? el('span', { class: 'muted' }, '—')
        : ns ? link(keyHref(ns, t.concurrency_key), t.concurrency_key, { class: 'mono' }) : el('span', { class: 'mono' }, t.concurrency_key),
      num(`${t.attempt_count}/${t.max_attempts}`),
      when(t.created_at),
      t.blocked_reason || '',
    ], { 'data-task-id': t.id })), { id: 'tasks' });
}

async function taskPage(id) {
  const [task, attempts, events] = await Promise.all([
    api.get(`/v1/tasks/${encodeURIComponent(id)}`).then((r) => r.data),
    api.get(`/v1/tasks/${encodeURIComponent(id)}/attempts`).then((r) => r.data),
    api.get(`/v1/tasks/${encodeURIComponent(id)}/events?limit=1000`).then((r) => r.data),
  ]);
  let ns = null;
  try {
    ns = (await api.get(`/v1/queues/${encodeURIComponent(task.queue_id)}`)).data.namespace_id;
  } catch (_) {
    ns = null;
  }
  const actions = el('div', { class: 'toolbar' });
  if (['WAITING', 'LEASED', 'RETRY_WAIT'].includes(task.state)) {
    actions.append(el('button', {
      id: 'cancel-task', class: 'danger',
      onclick: (e) => act(e.target, `Cancel task #${task.id}`, () => api.post(`/v1/tasks/${task.id}/cancel`)),
    }, 'Cancel task'));
  }
  if (task.state === 'NEEDS_REVIEW') {
    const resolution = el('select', { id: 'resolution' },
      ['succeeded', 'failed', 'requeue'].map((r) => el('option', { value: r }, r)));
    const note = el('input', { id: 'resolve-note', placeholder: 'note (JSON or text, optional)' });
    actions.append(resolution, note, el('button', {
      id: 'resolve-task', class: 'primary',
      onclick: (e) => act(e.target, `Resolve task #${task.id}`, () => resolve(task.id, resolution.value, note.value)),
    }, 'Resolve'));
  }
  if (!actions.childElementCount) {
    actions.append(el('span', { class: 'note' }, task.state === 'RUNNING'
      ? 'A running task cannot be cancelled: its attempt ends with its result or its lease.'
      : 'No action applies in this state.'));
  }
  return el('section', { id: 'page-task' },
    el('h1', {}, `Task #${task.id} `, el('span', { id: 'task-state' }, stateBadge(task.state))),
    actions,
    el('div', { class: 'card' }, facts([
      ['queue', link(`#/queue/${encodeURIComponent(task.queue_id)}`, task.queue_id)],
      ['handler', `${task.handler} (handler ${task.handler_version}, payload ${task.payload_version})`],
      ['concurrency key', task.concurrency_key === undefined ? '—'
        : ns ? link(keyHref(ns, task.concurrency_key), task.concurrency_key, { id: 'task-key', class: 'mono' }) : task.concurrency_key],
      ['business key', task.business_key || '—'],
      ['priority', String(task.priority)],
      ['attempts', `${task.attempt_count} of ${task.max_attempts}`],
      ['run at', when(task.run_at)],
      ['deadline', when(task.deadline_at)],
      ['blocked', task.blocked_reason || '—'],
      ['plan', task.plan_id ? `#${task.plan_id} v${task.plan_version}` : '—'],
      ['created', when(task.created_at)],
      ['finished', when(task.finished_at)],
    ])),
    el('h2', {}, 'Payload'),
    el('pre', { id: 'payload' }, pretty(task.payload)),
    task.error !== undefined ? [el('h2', {}, 'Error'), el('pre', { id: 'task-error' }, pretty(task.error))] : null,
    task.output !== undefined ? [el('h2', {}, 'Output'), el('pre', { id: 'task-output' }, pretty(task.output))] : null,
    el('h2', {}, 'Attempts'),
    table(['#', 'State', 'Worker', { label: 'Session', num: 1 }, { label: 'Token', num: 1 }, 'Granted',
      'Lease expires', 'Started', 'Released', 'Outcome'],
    attempts.map((a) => row([
      String(a.attempt_no), stateBadge(a.state), a.worker_id, num(a.session_id),
      el('td', { class: 'num token' }, a.concurrency_token || '—'),
      when(a.granted_at), a.released_at ? '—' : `${when(a.lease_expires_at)} (${ago(a.lease_expires_at)})`,
      when(a.started_at), when(a.released_at),
      [a.outcome || '', a.late_result ? ` (late: ${a.late_result})` : ''],
    ])), { id: 'attempts' }),
    el('h2', {}, 'History'),
    timeline(task, attempts, events));
}

function parseNote(text) {
  if (!text.trim()) return undefined;
  try {
    return JSON.parse(text);
  } catch (_) {
    return text;
  }
}

function resolve(id, resolution, noteText) {
  const body = { resolution };
  const note = parseNote(noteText || '');
  if (note !== undefined) body.note = note;
  return api.post(`/v1/tasks/${id}/resolve`, body);
}

/// The task's timeline: its acceptance, each attempt's grant and start (from the attempt rows),
/// and the history events (attempt ends, cancel, resolve, expiry).
function timeline(task, attempts, events) {
  const items = [{ at: task.created_at, text: 'submitted', order: 0 }];
  for (const a of attempts) {
    items.push({ at: a.granted_at, text: `attempt ${a.attempt_no} granted to ${a.worker_id}` + (a.concurrency_token ? ` with token ${a.concurrency_token}` : ''), order: 1 });
    if (a.started_at) items.push({ at: a.started_at, text: `attempt ${a.attempt_no} started`, order: 2 });
  }
  for (const e of events) {
    // Rows for what the task and attempt rows already show are skipped.
    if (['submitted', 'granted', 'started'].includes(e.event)) continue;
    let text = e.event;
    if (e.from_state || e.to_state) text += ` (${e.from_state || '∅'} → ${e.to_state || '∅'})`;
    if (e.concurrency_token) text += ` token ${e.concurrency_token}`;
    if (e.detail) text += ` — ${e.detail}`;
    items.push({ at: e.created_at, text, order: 3 });
  }
  items.sort((x, y) => (new Date(x.at) - new Date(y.at)) || (x.order - y.order));
  return el('ul', { class: 'timeline', id: 'timeline' },
    items.map((i) => el('li', {}, el('span', { class: 'when' }, when(i.at)), i.text)));
}

async function namespacesOf() {
  const queues = await allQueues();
  return [...new Set(queues.map((q) => q.namespace_id))].sort((a, b) => a - b);
}

async function keysPage(params) {
  const namespaces = await namespacesOf();
  const ns = params.get('ns') || (namespaces.length ? String(namespaces[0]) : '');
  const order = params.get('order') === 'oldest_wait' ? 'oldest_wait' : 'waiting';
  const nsSelect = el('select', { id: 'keys-namespace', onchange: () => go() },
    namespaces.map((n) => el('option', { value: n, selected: String(n) === ns }, `namespace ${n}`)));
  const orderSelect = el('select', { id: 'keys-order', onchange: () => go() },
    el('option', { value: 'waiting', selected: order === 'waiting' }, 'most waiting first'),
    el('option', { value: 'oldest_wait', selected: order === 'oldest_wait' }, 'oldest wait first'));
  function go() {
    location.hash = '#/keys' + query({ ns: nsSelect.value, order: orderSelect.value });
  }
  const lookup = el('input', { id: 'key-lookup', placeholder: 'look up a key (exact)' });
  const head = el('section', { id: 'page-keys' },
    el('h1', {}, 'Keys'),
    el('p', { class: 'note' }, 'Held keys, busiest first. A key is freed by its holder finishing, its lease lapsing, or by cancelling the holder\'s task (not yet started); there is no manual unlock, and the next holder always gets a larger token.'),
    el('div', { class: 'toolbar' }, nsSelect, orderSelect,
      el('form', { class: 'toolbar', onsubmit: (e) => { e.preventDefault(); if (lookup.value) location.hash = keyHref(nsSelect.value, lookup.value); } },
        lookup, el('button', { type: 'submit', id: 'key-lookup-go' }, 'Inspect'))));
  if (!ns) {
    head.append(el('p', { class: 'muted' }, 'No namespace is reachable with this token.'));
    return head;
  }
  const list = await api.get('/v1/keys' + query({ namespace: ns, order, limit: 100 }));
  head.append(table(['Key', { label: 'Token', num: 1 }, 'Holder task', 'State', 'Worker', 'Lease expires',
    { label: 'Waiting', num: 1 }, 'Oldest waiter since'],
  list.data.map((k) => row([
    link(keyHref(ns, k.concurrency_key), k.concurrency_key, { class: 'key-link mono' }),
    el('td', { class: 'num token' }, k.holder.concurrency_token),
    link(`#/task/${k.holder.task_id}`, `#${k.holder.task_id}`),
    stateBadge(k.holder.state),
    k.holder.worker_id,
    `${when(k.holder.lease_expires_at)} (${ago(k.holder.lease_expires_at)})`,
    num(k.waiting + (k.waiting_more ? '+' : '')),
    k.oldest_waiting_since ? `${when(k.oldest_waiting_since)} (${ago(k.oldest_waiting_since)})` : '—',
  ], { 'data-key': k.concurrency_key })), { id: 'keys' }));
  return head;
}

async function keyPage(ns, key) {
  const k = (await api.get('/v1/keys' + query({ namespace: ns, concurrency_key: key }))).data;
  const h = k.holder;
  const holder = h
    ? el('div', { class: 'card', id: 'holder' },
      facts([
        ['token', el('span', { class: 'token', id: 'holder-token' }, h.concurrency_token)],
        ['task', link(`#/task/${h.task_id}`, `#${h.task_id}`, { id: 'holder-task' })],
        ['attempt', String(h.attempt_id)],
        ['state', stateBadge(h.state)],
        ['worker', el('span', { id: 'holder-worker' }, h.worker_id)],
        ['session', String(h.session_id)],
        ['queue', link(`#/queue/${encodeURIComponent(h.queue_id)}`, h.queue_id)],
        ['granted', `${when(h.granted_at)} (${ago(h.granted_at)})`],
        ['lease expires', `${when(h.lease_expires_at)} (${ago(h.lease_expires_at)})`],
      ]),
      el('div', { class: 'toolbar' },
        el('button', {
          id: 'cancel-holder', class: 'danger', disabled: h.state !== 'LEASED',
          onclick: (e) => act(e.target, `Cancel task #${h.task_id}`, () => api.post(`/v1/tasks/${h.task_id}/cancel`)),
        }, "Cancel the holder's task"),
        el('span', { class: 'note' }, h.state === 'LEASED'
          ? 'Cancelling frees the key; the next task gets it with a larger token.'
          : 'The holder is running: it cannot be cancelled; the key is freed by its result or when its lease lapses.')))
    : el('div', { class: 'card', id: 'holder' }, el('span', { id: 'holder-none' }, 'Nobody holds this key.'));
  return el('section', { id: 'page-key' },
    el('h1', {}, 'Key ', el('code', { id: 'key-name' }, k.concurrency_key)),
    facts([
      ['namespace', String(k.namespace_id)],
      ['highest token', el('span', { class: 'token', id: 'highest-token' }, k.highest_token)],
      ['holders', el('span', { id: 'key-holders' }, `${k.holders} of ${k.limit}`)],
      ['rate', el('span', { id: 'key-rate' }, k.rate
        ? `${k.rate.grants} per ${k.rate.per_seconds} s` + (k.rate_wake_at ? `; next grant at ${when(k.rate_wake_at)}` : '')
        : 'none')],
      ['waiting', el('span', { id: 'key-waiting' }, k.waiting + (k.waiting_more ? '+' : ''))],
      ['oldest waiter', k.oldest_task_id ? [link(`#/task/${k.oldest_task_id}`, `#${k.oldest_task_id}`), ` since ${when(k.oldest_waiting_since)} (${ago(k.oldest_waiting_since)})`] : '—'],
      ['next holder', k.next_task_id ? [link(`#/task/${k.next_task_id}`, `#${k.next_task_id}`, { id: 'next-task' }), ` (${k.next_lane})`] : '—'],
    ]),
    el('h2', {}, k.holders > 1 ? `Oldest of ${k.holders} holders` : 'Holder'),
    holder,
    el('h2', {}, 'Waiting per queue'),
    table(['Queue', { label: 'Waiting', num: 1 }, { label: 'Ready', num: 1 }, 'Oldest', 'Next'],
      k.queues.map((q) => row([
        link(`#/queue/${encodeURIComponent(q.queue_id)}?key=${encodeURIComponent(k.concurrency_key)}`, q.queue_id),
        num(q.waiting + (q.waiting_more ? '+' : '')), num(q.ready),
        [link(`#/task/${q.oldest_task_id}`, `#${q.oldest_task_id}`), ` ${ago(q.oldest_waiting_since)}`],
        q.next_task_id ? link(`#/task/${q.next_task_id}`, `#${q.next_task_id}`) : '—',
      ])), { id: 'key-queues' }),
    el('h2', {}, 'Recent grants'),
    table(['Attempt', 'Task', 'Worker', { label: 'Token', num: 1 }, { label: 'Slot', num: 1 }, 'State', 'Granted', 'Released', 'Outcome'],
      (k.recent_grants || []).map((g) => row([
        String(g.attempt_id), link(`#/task/${g.task_id}`, `#${g.task_id}`), g.worker_id,
        el('td', { class: 'num token' }, g.concurrency_token), num(g.key_slot), stateBadge(g.state),
        when(g.granted_at), when(g.released_at), g.outcome || '',
      ])), { id: 'grants' }));
}

async function reviewPage() {
  const list = await api.get('/v1/tasks?state=NEEDS_REVIEW&limit=100');
  return el('section', { id: 'page-review' },
    el('h1', {}, 'Needs review'),
    el('p', { class: 'note' }, 'Tasks whose outcome is unknown (a lost lease or a worker that could not tell). Settle each: succeeded, failed, or requeue (a new attempt with a larger token).'),
    table(['Task', 'Queue', 'Handler', 'Key', 'Since', 'Resolve'],
      list.data.map((t) => row([
        link(`#/task/${t.id}`, `#${t.id}`, { class: 'task-link' }),
        link(`#/queue/${encodeURIComponent(t.queue_id)}`, t.queue_id.slice(0, 8) + '…'),
        t.handler,
        t.concurrency_key === undefined ? '—' : el('span', { class: 'mono' }, t.concurrency_key),
        when(t.updated_at),
        el('td', {}, ['succeeded', 'failed', 'requeue'].map((r) => el('button', {
          id: `resolve-${t.id}-${r}`, class: r === 'succeeded' ? 'primary' : '',
          onclick: (e) => act(e.target, `Resolve task #${t.id} as ${r}`, () => resolve(t.id, r, '')),
        }, r), ' ')),
      ], { 'data-task-id': t.id })), { id: 'review' }));
}

async function plansPage() {
  const plans = [];
  let cursor = null;
  for (let page = 0; page < 10; page++) {
    const r = await api.get('/v1/plans' + query({ limit: 500, cursor }));
    plans.push(...r.data);
    cursor = r.next_cursor;
    if (!cursor) break;
  }
  const schedule = (s) => (s && s.interval_seconds !== undefined ? `every ${s.interval_seconds} s` : pretty(s));
  return el('section', { id: 'page-plans' },
    el('h1', {}, 'Plans'),
    table(['Plan', 'Queue', { label: 'Version', num: 1 }, 'Schedule', 'Status', 'Next fire', 'Handler', 'Key', ''],
      plans.map((p) => row([
        [el('strong', {}, p.name), el('span', { class: 'muted' }, ` #${p.id}`)],
        link(`#/queue/${encodeURIComponent(p.queue_id)}`, p.queue_id.slice(0, 8) + '…'),
        num(p.current_version),
        schedule(p.schedule),
        p.paused ? stateBadge('paused') : 'active',
        p.paused ? '—' : `${when(p.next_fire_at)} (${ago(p.next_fire_at)})`,
        p.definition.task.handler,
        p.definition.task.concurrency_key === undefined ? '—' : el('span', { class: 'mono' }, p.definition.task.concurrency_key),
        el('button', {
          id: `plan-${p.id}-${p.paused ? 'resume' : 'pause'}`,
          onclick: (e) => act(e.target, `${p.paused ? 'Resume' : 'Pause'} plan ${p.name}`,
            () => api.post(`/v1/plans/${p.id}/${p.paused ? 'resume' : 'pause'}`)),
        }, p.paused ? 'Resume' : 'Pause'),
      ], { 'data-plan-id': p.id })), { id: 'plans' }));
}

// ---------------------------------------------------------------------------------------------
// Routing

function route() {
  const hash = location.hash.replace(/^#/, '') || '/';
  const [path, search] = hash.split('?', 2);
  const params = new URLSearchParams(search || '');
  const parts = path.split('/').filter(Boolean).map((p) => {
    try {
      return decodeURIComponent(p);
    } catch (_) {
      return p; // a malformed escape: taken as typed (the API answers 400 or 404)
    }
  });
  return { parts, params };
}

function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  throughputSample = null;
  location.hash = '#/signin';
}

let generation = 0;

async function render() {
  const main = document.getElementById('main');
  const nav = document.getElementById('nav');
  const { parts, params } = route();
  const mine = ++generation;
  if (!token() || parts[0] === 'signin') {
    nav.hidden = true;
    if (token() && parts[0] === 'signin') {
      location.hash = '#/';
      return;
    }
    if (!main.querySelector('#signin-form')) main.replaceChildren(signInPage());
    return;
  }
  nav.hidden = false;
  for (const a of nav.querySelectorAll('a')) {
    a.classList.toggle('active', a.getAttribute('href') === '#/' + (parts[0] || ''));
  }
  let page;
  try {
    switch (parts[0] || '') {
      case '': page = await overviewPage(); break;
      case 'queue': page = await queuePage(parts[1], params); break;
      case 'task': page = await taskPage(parts[1]); break;
      case 'keys': page = await keysPage(params); break;
      case 'key': page = await keyPage(parts[1], parts.slice(2).join('/')); break;
      case 'review': page = await reviewPage(); break;
      case 'plans': page = await plansPage(); break;
      default: page = el('p', { class: 'error-box' }, 'No such page.');
    }
  } catch (e) {
    if (e.status === 401) {
      signOut();
      return;
    }
    page = el('div', { class: 'error-box', id: 'page-error' }, `${e.code || 'ERROR'}: ${e.message}`);
  }
  // A newer render started meanwhile (navigation or an action): it wins.
  if (mine !== generation) return;
  main.replaceChildren(page);
  main.dataset.rendered = String(Date.now());
}

function refreshable() {
  const box = document.getElementById('auto-refresh');
  if (!box || !box.checked || busy || !token() || document.hidden) return false;
  // Not while the operator is typing or choosing in the page.
  const active = document.activeElement;
  return !(active && document.getElementById('main').contains(active) && ['INPUT', 'SELECT', 'TEXTAREA'].includes(active.tagName));
}

window.addEventListener('hashchange', () => {
  document.getElementById('flash').replaceChildren();
  render();
});
document.getElementById('sign-out').addEventListener('click', signOut);
setInterval(() => {
  if (refreshable()) render();
}, REFRESH_MS);
render();
