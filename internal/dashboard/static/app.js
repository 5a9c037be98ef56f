// Flotilla dashboard. Every user-provided string goes into the page as a text node (see h):
// nothing is ever parsed as HTML. Data comes from the dashboard's api/, which reads the
// inventory API as the logged-in user; live changes arrive on api/events.
'use strict';
(function () {
  const state = { user: null, csrf: '', live: null, refreshTimer: null, view: null };

  // h builds an element; strings and numbers become text nodes, never markup.
  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else if (k === 'class') el.className = v;
      else el.setAttribute(k, v === true ? '' : String(v));
    }
    for (const kid of kids.flat(Infinity)) {
      if (kid === null || kid === undefined || kid === false) continue;
      el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return el;
  }
  const svgNS = 'http://www.w3.org/2000/svg';
  function s(tag, attrs, ...kids) {
    const el = document.createElementNS(svgNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
    for (const kid of kids.flat()) if (kid) el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    return el;
  }
  const $ = (id) => document.getElementById(id);
  const enc = encodeURIComponent;

  async function api(path, opts) {
    opts = opts || {};
    const headers = {};
    if (opts.method && opts.method !== 'GET') {
      headers['X-CSRF-Token'] = state.csrf;
      headers['Content-Type'] = 'application/json';
    }
    const r = await fetch('api/' + path, { method: opts.method || 'GET', body: opts.body, headers, credentials: 'same-origin' });
    let body = null;
    try { body = await r.json(); } catch (e) { body = null; }
    if (!r.ok) {
      const err = new Error((body && body.message) || (r.status + ' ' + r.statusText));
      err.status = r.status;
      throw err;
    }
    return body;
  }

  // Routes: #/fleet, #/cell/NS/APP-OR-TEMPLATE/CLUSTER, #/clusters, #/cluster/NAME, #/releases,
  // #/release/NS/NAME, #/history?application=&cluster=&team=
  function route() {
    const hash = location.hash.replace(/^#\/?/, '');
    const [path, query] = hash.split('?');
    const parts = path.split('/').map(decodeURIComponent);
    return { name: parts[0] || 'fleet', args: parts.slice(1), query: new URLSearchParams(query || '') };
  }
  function link(text, hash, attrs) { return h('a', Object.assign({ href: hash }, attrs || {}), text); }

  const views = {
    fleet: { title: 'Fleet', render: renderFleet },
    cell: { title: 'Fleet', render: renderCell },
    clusters: { title: 'Clusters', render: renderClusters },
    cluster: { title: 'Clusters', render: renderCluster },
    releases: { title: 'Releases', render: renderReleases },
    release: { title: 'Releases', render: renderRelease },
    history: { title: 'History', render: renderHistory },
  };

  function renderNav() {
    const r = route();
    const cur = views[r.name] ? views[r.name].title : '';
    const nav = $('nav');
    nav.replaceChildren(...['fleet', 'clusters', 'releases', 'history'].map((v) =>
      link(views[v].title, '#/' + v, { class: views[v].title === cur ? 'active' : null, 'data-nav': v })));
    $('who').replaceChildren(state.user ? h('span', {}, state.user,
      h('button', { class: 'secondary', id: 'logout', onclick: logout }, 'Log out')) : '');
  }

  // show renders the current route into main; refresh keeps the filters the user typed.
  async function show(refresh) {
    if (!state.user) return;
    renderNav();
    const r = route();
    const view = views[r.name] || views.fleet;
    const main = $('main');
    if (!refresh || state.view !== location.hash) {
      state.view = location.hash;
      main.replaceChildren(h('div', { id: 'controls' }), h('div', { id: 'content' }, h('p', { class: 'muted' }, 'Loading…')));
      if (view.controls) view.controls(r, $('controls'));
    }
    try {
      const content = await view.render(r);
      if (state.view === location.hash) $('content').replaceChildren(content);
    } catch (e) {
      if (e.status === 401) return loginPage();
      $('content').replaceChildren(h('p', { class: 'error', role: 'alert' }, e.message));
    }
  }

  function scheduleRefresh() {
    clearTimeout(state.refreshTimer);
    state.refreshTimer = setTimeout(() => show(true), 200);
  }

  function connectLive() {
    if (state.live) state.live.close();
    const es = new EventSource('api/events');
    state.live = es;
    es.addEventListener('ready', () => $('live').classList.add('on'));
    es.addEventListener('changes', scheduleRefresh);
    es.addEventListener('resync', scheduleRefresh);
    es.onerror = () => $('live').classList.remove('on');
  }

  // ----- login -----
  function loginPage() {
    state.user = null;
    if (state.live) { state.live.close(); state.live = null; }
    renderNav();
    const msg = h('p', { class: 'error', id: 'login-error', role: 'alert' });
    const token = h('textarea', { id: 'token', placeholder: 'eyJhbGciOi…', autocomplete: 'off', spellcheck: 'false' });
    const form = h('form', { class: 'card login', onsubmit: async (ev) => {
      ev.preventDefault();
      try {
        const me = await api('login', { method: 'POST', body: JSON.stringify({ token: token.value }) });
        start(me);
      } catch (e) { msg.textContent = e.message; }
    } },
    h('h1', {}, 'Log in to Flotilla'),
    h('p', { class: 'muted' }, 'Paste a bearer token the control plane accepts (for example from `kubectl create token`). You see and do exactly what your Kubernetes roles allow.'),
    token, h('p', {}, h('button', { type: 'submit', id: 'login' }, 'Log in'), ' ',
      h('button', { type: 'button', class: 'secondary', id: 'login-certificate', onclick: async () => {
        try { start(await api('login/certificate', { method: 'POST' })); } catch (e) { msg.textContent = e.message; }
      } }, 'Use my client certificate (read only)')), msg);
    $('main').replaceChildren(form);
  }

  async function logout() {
    try { await api('logout', { method: 'POST' }); } catch (e) { /* logged out either way */ }
    loginPage();
  }

  function start(me) {
    state.user = me.user;
    state.csrf = me.csrf;
    connectLive();
    if (!location.hash) location.hash = '#/fleet';
    show(false);
  }

  // ----- fleet matrix -----
  function labelFilter(text) {
    const want = text.split(',').map((t) => t.trim()).filter(Boolean).map((t) => t.split('='));
    return (labels) => want.every(([k, v]) => labels && (v === undefined ? k in labels : labels[k] === v));
  }
  function filterInputs(r, spec) {
    const box = h('div', { class: 'filters' });
    for (const f of spec) {
      const input = f.options
        ? h('select', { id: 'filter-' + f.key }, h('option', { value: '' }, f.all), f.options.map((o) => h('option', { value: o, selected: r.query.get(f.key) === o }, o)))
        : h('input', { id: 'filter-' + f.key, placeholder: f.placeholder, value: r.query.get(f.key) || '' });
      input.addEventListener('change', () => {
        const q = new URLSearchParams(route().query);
        if (input.value) q.set(f.key, input.value); else q.delete(f.key);
        location.hash = '#/' + r.name + (r.args.length ? '/' + r.args.map(enc).join('/') : '') + (q.toString() ? '?' + q : '');
      });
      box.append(h('label', {}, f.label + ' ', input));
    }
    return box;
  }

  function shortImage(img) {
    const i = img.lastIndexOf('/');
    return i >= 0 ? img.slice(i + 1) : img;
  }
  // driftTag marks drift: reported and standing, or put back (how often, when).
  function driftTag(p) {
    if (p.driftCorrections) {
      return h('span', { class: 'tag fixed', title: 'put back ' + p.driftCorrections + '×, last ' + new Date(p.lastCorrection).toLocaleString() + '\n' + (p.drifted || []).join('\n') },
        'drift put back ×' + p.driftCorrections);
    }
    if (p.drifted && p.drifted.length) return h('span', { class: 'tag drift', title: p.drifted.join('\n') }, 'drift');
    return null;
  }
  function health(p) { return p.health || (p.applied ? 'Unknown' : 'Pending'); }

  // groupByApplication makes one row per Application (its templates together) and one per
  // template that belongs to none; row.name is the application's or the template's name.
  function groupByApplication(items) {
    const rows = new Map();
    for (const w of items) {
      const name = w.application || w.name;
      const key = w.namespace + '/' + (w.application ? 'app:' + w.application : w.kind + '/' + w.name);
      if (!rows.has(key)) rows.set(key, { namespace: w.namespace, name, title: w.application || (w.kind + '/' + w.name), description: w.description, items: [] });
      rows.get(key).items.push(w);
    }
    return [...rows.values()];
  }

  const worse = ['Healthy', 'Unknown', 'Pending', 'Progressing', 'Degraded'];
  // summarize is one cell of several objects: the worst health, the revision and images of
  // the tracked workloads, synced only when all are.
  function summarize(ps) {
    const out = { health: 'Healthy', revision: 0, images: [], synced: true, lost: false, suspended: false };
    for (const p of ps) {
      const hl = health(p);
      if (worse.indexOf(hl) > worse.indexOf(out.health)) out.health = hl;
      // The revision shown is a workload's (one with images), else any tracked one.
      if (p.revision && (!out.revision || (p.images && p.images.length && !out.fromWorkload))) {
        out.revision = p.revision;
        out.fromWorkload = !!(p.images && p.images.length);
      }
      for (const i of p.images || []) if (!out.images.includes(i)) out.images.push(i);
      out.synced = out.synced && p.synced;
      out.lost = out.lost || p.lost;
      out.suspended = out.suspended || p.suspended;
    }
    return out;
  }

  async function renderFleet(r) {
    const shown = state.view;
    const [apps, clusters] = await Promise.all([api('applications'), api('clusters').catch(() => ({ items: [] }))]);
    if (state.view !== shown) return h('div'); // the user moved on: the controls are another page's
    const teams = [...new Set(apps.items.map((w) => w.namespace).filter(Boolean))].sort();
    const controls = $('controls');
    if (!controls.firstChild) {
      controls.append(filterInputs(r, [
        { key: 'team', label: 'Team', all: 'all teams', options: teams },
        { key: 'app', label: 'App labels', placeholder: 'tier=web,owner' },
        { key: 'cluster', label: 'Cluster labels', placeholder: 'region=eu' },
      ]));
    }
    const team = r.query.get('team') || '';
    const appOk = labelFilter(r.query.get('app') || '');
    const clusterOk = labelFilter(r.query.get('cluster') || '');
    const known = new Map(clusters.items.map((c) => [c.name, c]));
    for (const w of apps.items) for (const p of w.clusters) if (!known.has(p.cluster)) known.set(p.cluster, { name: p.cluster, labels: {} });
    const cols = [...known.values()].filter((c) => clusterOk(c.labels || {})).sort((a, b) => a.name.localeCompare(b.name));
    const rows = groupByApplication(apps.items.filter((w) => (!team || w.namespace === team) && appOk(w.labels || {})));
    if (rows.length === 0) return h('p', { class: 'muted', id: 'empty' }, 'No applications you may read match.');
    const head = h('tr', {}, h('th', {}, 'Application'), cols.map((c) => h('th', { title: c.shortName ? c.name + ' (' + c.shortName + ')' : c.name, 'data-column': c.name }, h('span', { class: 'dot ' + (c.ready || '') }), c.name)));
    const body = rows.map((row) => {
      const objects = row.items.map((w) => w.kind + '/' + w.name);
      return h('tr', { 'data-app': row.namespace + '/' + row.name },
        h('td', {}, h('strong', { class: 'app-name' }, row.title),
          h('div', { class: 'muted' }, row.namespace + ' · ' + (objects.length > 3 ? objects.length + ' objects' : objects.join(', '))),
          row.description ? h('div', { class: 'muted app-description' }, row.description) : null),
        cols.map((c) => {
          const ps = row.items.map((w) => w.clusters.find((p) => p.cluster === c.name)).filter(Boolean);
          if (!ps.length) return h('td', { class: 'muted' }, '—');
          const p = summarize(ps);
          return h('td', {
            class: 'cell ' + p.health, 'data-cell': row.namespace + '/' + row.name + '/' + c.name,
            onclick: () => { location.hash = '#/cell/' + [row.namespace, row.name, c.name].map(enc).join('/'); },
          },
          h('span', { class: 'dot' }), p.revision ? h('span', { class: 'rev' }, 'r' + p.revision + ' ') : null, h('span', { class: 'health' }, p.health),
          p.images.map((i) => h('span', { class: 'img' }, shortImage(i))),
          ps.length < row.items.length ? h('span', { class: 'img' }, ps.length + ' of ' + row.items.length + ' objects here') : null,
          h('div', {},
            p.synced ? null : h('span', { class: 'tag out', title: 'not on the latest revision' }, 'out of sync'),
            ps.map(driftTag),
            p.lost ? h('span', { class: 'tag lost' }, 'cluster lost') : null,
            p.suspended ? h('span', { class: 'tag' }, 'suspended') : null));
        }));
    });
    return h('table', { id: 'matrix' }, h('thead', {}, head), h('tbody', {}, body));
  }

  async function renderCell(r) {
    const [ns, name, cluster] = r.args;
    const apps = await api('applications?' + new URLSearchParams({ namespace: ns }));
    const items = apps.items.filter((w) => w.application === name).concat(apps.items.filter((w) => !w.application && w.name === name));
    if (!items.length) return h('p', { class: 'error' }, name + ' is not placed in ' + ns + ', or you may not read it.');
    const app = items[0].application;
    const hist = await api('history?' + new URLSearchParams(Object.assign(app ? { application: app } : { name }, { cluster, limit: '20' }))).catch(() => ({ items: [] }));
    const cards = items.map((w) => {
      const p = w.clusters.find((c) => c.cluster === cluster);
      const rows = [
        ['Object', w.kind + ' ' + ns + '/' + w.name],
        ['Revision', p && p.revision ? 'r' + p.revision + ' (latest r' + (w.latestRevision || p.revision) + ')' : (p ? 'not tracked (no rollout)' : 'not placed in ' + cluster)],
        ['Health', p ? health(p) : '—'], ['Synced', p ? (p.synced ? 'yes' : 'no') : '—'],
        ['Replicas', p && p.replicas !== undefined ? (p.readyReplicas || 0) + ' ready of ' + p.replicas : '—'],
        ['Images', p && p.images ? p.images.join(', ') : '—'], ['Commit', (p && p.commit) || w.commit || '—'],
        ['Since', p && p.since ? new Date(p.since).toLocaleString() : '—'],
        ['Last error', (p && p.message) || '—'],
        ['Drift', p && p.driftCorrections ? 'put back ' + p.driftCorrections + '× (last ' + new Date(p.lastCorrection).toLocaleString() + '): ' + (p.drifted || []).join('; ')
          : (p && p.drifted ? 'standing (reported): ' + p.drifted.join('; ') : 'none')],
        ['Placed by', [w.policy].concat(w.targetPolicies || []).join(', ')],
      ];
      return h('div', { class: 'card', 'data-object': w.kind + '/' + w.name }, h('dl', {}, rows.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])));
    });
    return h('div', {},
      h('h1', {}, (app || items[0].kind + '/' + name) + ' in ' + cluster),
      items[0].description ? h('p', { class: 'muted app-description' }, items[0].description) : null,
      h('div', { id: 'cell-detail' }, cards),
      h('h2', {}, 'Events'), timeline(hist.items),
      h('p', {}, link('Whole history of ' + (app || name), '#/history?' + new URLSearchParams(app ? { application: app } : { name }))));
  }

  // ----- clusters -----
  async function renderClusters() {
    let cl;
    try {
      cl = await api('clusters');
    } catch (e) {
      if (e.status !== 403) throw e;
      // A team's roles read its own namespace, not the fleet: say so, and where to look.
      return h('div', { class: 'card', id: 'clusters-forbidden' },
        h('p', {}, 'Your roles do not let you list the fleet\'s clusters (' + e.message + ').'),
        h('p', { class: 'muted' }, 'The Fleet page shows every cluster your applications run on, with their health there; ask the platform team for read access to clusters.cluster.flotilla.dev to see the whole fleet.'));
    }
    const res = (c, k) => {
      const r = c.resources || {};
      const used = (r.requested || {})[k], all = (r.allocatable || {})[k], pct = (r.usage || {})[k === 'cpu' ? 'cpu' : k];
      return all ? (used || '0') + ' / ' + all + (pct ? ' (' + pct + ')' : '') : '—';
    };
    return h('table', { id: 'clusters' },
      h('thead', {}, h('tr', {}, ['Cluster', 'Ready', 'Environment', 'Version', 'Nodes', 'CPU used/allocatable', 'Memory used/allocatable', 'Taints', 'Workloads'].map((t) => h('th', {}, t)))),
      h('tbody', {}, cl.items.map((c) => h('tr', { class: 'click', 'data-cluster': c.name, onclick: () => { location.hash = '#/cluster/' + enc(c.name); } },
        h('td', {}, h('strong', {}, c.name), c.description ? h('div', { class: 'muted cluster-description' }, c.description) : null),
        h('td', {}, h('span', { class: 'dot ' + c.ready }), c.ready === 'True' ? 'Ready' : (c.reason || 'Not ready')),
        h('td', {}, c.environment || '—'), h('td', {}, c.version || '—'),
        h('td', {}, c.nodes ? c.nodes.ready + '/' + c.nodes.total : '—'),
        h('td', {}, res(c, 'cpu')), h('td', {}, res(c, 'memory')),
        h('td', {}, (c.taints || []).map((t) => h('span', { class: 'tag' }, t.key + (t.value ? '=' + t.value : '') + ':' + t.effect))),
        h('td', {}, String(c.workloads))))));
  }

  async function renderCluster(r) {
    const name = r.args[0];
    const [cl, apps, hist] = await Promise.all([api('clusters'), api('applications?' + new URLSearchParams({ cluster: name })),
      api('history?' + new URLSearchParams({ cluster: name, limit: '30' })).catch(() => ({ items: [] }))]);
    const c = cl.items.find((x) => x.name === name);
    if (!c) return h('p', { class: 'error' }, 'No cluster ' + name + '.');
    const labels = Object.entries(c.labels || {}).map(([k, v]) => h('span', { class: 'tag' }, k + '=' + v));
    return h('div', {},
      h('h1', {}, h('span', { class: 'dot ' + c.ready }), c.name),
      h('div', { class: 'card' }, h('dl', {},
        h('dt', {}, 'Description'), h('dd', { class: 'cluster-description' }, c.description || '—'),
        h('dt', {}, 'Environment'), h('dd', {}, c.environment || '—'),
        h('dt', {}, 'Ready'), h('dd', {}, c.ready + (c.reason ? ' (' + c.reason + ')' : '')),
        h('dt', {}, 'Version'), h('dd', {}, c.version || '—'),
        h('dt', {}, 'Labels'), h('dd', {}, labels.length ? labels : '—'),
        h('dt', {}, 'Taints'), h('dd', {}, (c.taints || []).map((t) => t.key + ':' + t.effect).join(', ') || 'none'))),
      h('h2', {}, 'What runs here'),
      apps.items.length ? h('table', {}, h('tbody', {}, apps.items.map((w) => {
        const p = w.clusters.find((x) => x.cluster === name) || {};
        return h('tr', { class: 'click ' + health(p), onclick: () => { location.hash = '#/cell/' + [w.namespace, w.application || w.name, name].map(enc).join('/'); } },
          h('td', {}, w.application || w.name), h('td', { class: 'muted' }, w.namespace + ' · ' + w.kind + '/' + w.name),
          h('td', {}, p.revision ? 'r' + p.revision : ''), h('td', {}, h('span', { class: 'dot' }), health(p)));
      }))) : h('p', { class: 'muted' }, 'Nothing you may read.'),
      h('h2', {}, 'History'), timeline(hist.items));
  }

  // ----- releases -----
  async function renderReleases() {
    const rl = await api('releases');
    if (!rl.items.length) return h('p', { class: 'muted' }, 'No releases you may read.');
    return h('table', { id: 'releases' },
      h('thead', {}, h('tr', {}, ['Release', 'Template', 'Revision', 'Phase', 'Wave', 'Started'].map((t) => h('th', {}, t)))),
      h('tbody', {}, rl.items.map((x) => h('tr', { class: 'click', 'data-release': x.namespace + '/' + x.name, onclick: () => { location.hash = '#/release/' + enc(x.namespace) + '/' + enc(x.name); } },
        h('td', {}, x.name, h('div', { class: 'muted' }, x.namespace)), h('td', {}, x.kind + '/' + x.template),
        h('td', {}, 'r' + x.stableRevision + ' → r' + x.revision), h('td', {}, h('span', { class: 'phase ' + x.phase }, x.phase || 'Pending')),
        h('td', {}, x.status.wave || '—'), h('td', {}, x.status.startedAt ? new Date(x.status.startedAt).toLocaleString() : '—')))));
  }

  const permCache = new Map();
  async function mayAct(ns) {
    const hit = permCache.get(ns);
    if (hit && Date.now() - hit.at < 30000) return hit.ok;
    const p = await api('permissions?' + new URLSearchParams({ namespace: ns })).catch(() => ({ steer: false }));
    permCache.set(ns, { ok: p.steer, at: Date.now() });
    return p.steer;
  }

  // The answer to the last action stays on its release's page across live refreshes.
  function actionResult(x) {
    const a = state.lastAction;
    const mine = a && a.release === x.namespace + '/' + x.name;
    return h('p', { id: 'action-result', role: 'status', class: mine ? a.cls : '' }, mine ? a.text : '');
  }

  async function act(x, verb) {
    const key = x.namespace + '/' + x.name;
    try {
      const res = await api('releases/' + enc(x.namespace) + '/' + enc(x.name) + '/' + verb, { method: 'POST' });
      state.lastAction = { release: key, cls: 'muted', text: res.message };
    } catch (e) {
      state.lastAction = { release: key, cls: 'error', text: e.message };
    }
    $('action-result').replaceWith(actionResult(x));
    scheduleRefresh();
  }

  async function renderRelease(r) {
    const [ns, name] = r.args;
    const rl = await api('releases?' + new URLSearchParams({ namespace: ns, name }));
    const x = rl.items[0];
    if (!x) return h('p', { class: 'error' }, 'No release ' + ns + '/' + name + ', or you may not read it.');
    const st = x.status || {};
    const over = ['Succeeded', 'Aborted', 'RolledBack', 'Superseded'].includes(x.phase);
    let buttons = null;
    if (await mayAct(ns)) {
      const failed = (st.waves || []).some((w) => w.phase === 'Failed');
      const verbs = [];
      if (!over) verbs.push('promote', x.paused ? 'resume' : 'pause', 'abort');
      if (x.phase === 'Aborted' || x.phase === 'RolledBack' || failed) verbs.push('retry');
      buttons = h('div', { class: 'actions' }, verbs.map((v) => h('button', { id: 'action-' + v, class: v === 'abort' ? 'danger' : (v === 'promote' ? '' : 'secondary'), onclick: () => act(x, v) }, v[0].toUpperCase() + v.slice(1))));
    }
    const waves = (st.waves || []).map((w, i) => {
      const steps = (x.steps || {})[w.name] || [];
      return h('div', { class: 'wave' + (i === (st.currentWave || 0) && !over ? ' current' : ''), 'data-wave': w.name },
        h('div', {}, h('strong', {}, w.name), ' ', h('span', { class: 'phase ' + w.phase }, w.phase)),
        w.message ? h('div', { class: 'muted' }, w.message) : null,
        h('div', {}, (w.clusters || []).map((c) => h('div', { 'data-cluster': c.name }, h('span', { class: 'phase ' + c.phase }, '● '), c.name + ' ', h('span', { class: 'muted' }, c.phase), c.traffic ? h('span', { class: 'traffic' }, ' · traffic ' + c.traffic) : null,
          c.message && ['Pending', 'Left', 'Degraded'].includes(c.phase) ? h('span', { class: 'muted' }, ' · ' + c.message) : null))),
        steps.length ? h('ol', { class: 'steps' }, steps.map((label, k) => h('li', { class: k === w.currentStep ? 'now' : '' }, label))) : null);
    });
    return h('div', {},
      h('h1', {}, 'release/' + x.name, ' ', h('span', { class: 'phase ' + x.phase, id: 'release-phase' }, x.phase || 'Pending'), x.paused ? h('span', { class: 'tag' }, 'paused') : null),
      h('p', { class: 'muted' }, x.kind + ' ' + (x.templateNamespace ? x.templateNamespace + '/' : '') + x.template + ': r' + x.stableRevision + ' → r' + x.revision + (st.message ? ' — ' + st.message : '')),
      buttons, actionResult(x),
      h('h2', {}, 'Waves'), h('div', { class: 'waves', id: 'waves' }, waves),
      h('h2', {}, 'Analysis'),
      (x.analyses || []).length ? x.analyses.map(analysisCard) : h('p', { class: 'muted' }, 'No analysis run yet.'),
      h('p', {}, link('History of ' + x.template, '#/history?' + new URLSearchParams({ name: x.template }))));
  }

  function analysisCard(a) {
    return h('div', { class: 'card', 'data-analysis': a.name },
      h('div', {}, h('strong', {}, a.name), a.wave ? ' (wave ' + a.wave + ') ' : ' (background) ', h('span', { class: 'phase ' + a.phase }, a.phase || 'Pending')),
      a.message ? h('div', { class: 'muted' }, a.message) : null,
      (a.metrics || []).map((m) => {
        const last = (m.measurements || [])[(m.measurements || []).length - 1];
        return h('div', { 'data-metric': m.name }, h('div', {}, m.name + ': ' + (m.phase || '') + ' · ' + (m.successful || 0) + ' passed, ' + (m.failed || 0) + ' failed'),
          last && last.message ? h('div', { class: 'muted verdict' }, last.message) : null, chart(m));
      }));
  }

  // chart draws a metric's measurements as a small line chart (SVG, built node by node).
  function chart(m) {
    const pts = (m.measurements || []).map((x) => {
      const n = parseFloat(String(x.value || '').replace(/^[^0-9.+-]*/, ''));
      return { v: n, phase: x.phase, t: x.finishedAt || x.startedAt, raw: x.value };
    }).filter((p) => Number.isFinite(p.v));
    const W = 320, H = 90, pad = 24;
    const svg = s('svg', { class: 'chart', width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, 'data-testid': 'analysis-chart', 'data-points': pts.length });
    svg.append(s('line', { class: 'axis', x1: pad, y1: H - pad, x2: W - 6, y2: H - pad }), s('line', { class: 'axis', x1: pad, y1: 6, x2: pad, y2: H - pad }));
    if (!pts.length) { svg.append(s('text', { x: pad + 6, y: H / 2 }, 'no measurement yet')); return svg; }
    const max = Math.max(...pts.map((p) => p.v)), min = Math.min(0, ...pts.map((p) => p.v));
    const span = max - min || 1;
    const x = (i) => pad + (pts.length === 1 ? (W - pad - 6) / 2 : i * (W - pad - 12) / (pts.length - 1));
    const y = (v) => H - pad - (v - min) / span * (H - pad - 10);
    svg.append(s('polyline', { class: 'line', points: pts.map((p, i) => x(i) + ',' + y(p.v)).join(' ') }));
    pts.forEach((p, i) => svg.append(s('circle', { class: 'pt ' + (p.phase || ''), cx: x(i), cy: y(p.v), r: 3 }, s('title', {}, String(p.raw) + ' ' + (p.phase || '')))));
    svg.append(s('text', { x: 2, y: 12 }, String(+max.toPrecision(3))), s('text', { x: 2, y: H - pad }, String(+min.toPrecision(3))));
    return svg;
  }

  // ----- history -----
  // A kind without revisions (no rollout) records 0 → 0: say nothing rather than "r0 → r0".
  function revisionChange(it) {
    if (!it.fromRevision && !it.toRevision) return '';
    return (it.fromRevision ? 'r' + it.fromRevision : '—') + ' → ' + (it.outcome === 'removed' ? '—' : 'r' + it.toRevision);
  }
  // "release web-r2 wave 1/2" already names its cause; other details follow it.
  function causeText(it) {
    if (!it.causeDetail) return it.cause;
    return it.causeDetail.startsWith(it.cause + ' ') ? it.causeDetail : it.cause + ': ' + it.causeDetail;
  }
  function timeline(items) {
    if (!items || !items.length) return h('p', { class: 'muted' }, 'Nothing recorded.');
    return h('ul', { class: 'timeline' }, items.map((it) => h('li', { class: it.outcome, 'data-history': it.id },
      h('time', { datetime: it.time }, new Date(it.time).toLocaleString()),
      h('strong', {}, it.cluster), ' ', it.kind + ' ' + (it.namespace ? it.namespace + '/' : '') + it.name, ' ',
      revisionChange(it), ' ',
      h('span', { class: 'tag' }, causeText(it)),
      it.actor ? h('span', { class: 'muted' }, ' by ' + it.actor) : null, ' ',
      h('span', { class: 'phase ' + it.outcome }, it.outcome),
      it.message ? h('div', { class: 'muted' }, it.message) : null)));
  }

  async function renderHistory(r) {
    const controls = $('controls');
    if (!controls.firstChild) {
      controls.append(filterInputs(r, [
        { key: 'application', label: 'Application', placeholder: 'name' },
        { key: 'name', label: 'Object', placeholder: 'name' },
        { key: 'cluster', label: 'Cluster', placeholder: 'name' },
        { key: 'team', label: 'Team', placeholder: 'namespace' },
      ]));
    }
    const q = new URLSearchParams();
    for (const k of ['application', 'name', 'cluster', 'team']) if (r.query.get(k)) q.set(k, r.query.get(k));
    q.set('limit', '200');
    const page = await api('history?' + q);
    return h('div', { id: 'history' }, timeline(page.items));
  }

  window.addEventListener('hashchange', () => show(false));
  api('session').then(start, () => loginPage());
})();
