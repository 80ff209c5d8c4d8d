// SPDX-License-Identifier: MIT
// GET /jobs/{job_id}: the runs sharing a job_id tag, their ops merged, each
// rank against the job and the stragglers, from GET /v1/jobs/{job_id};
// refreshed while the job is running.
'use strict';

(function () {
  if (!mlmon.page('job')) return;
  const { el, clear, known, bdi } = mlmon;
  // The path's segment is the URL-encoded job id.
  const jobId = decodeURIComponent(location.pathname.split('/')[2] || '');
  const REFRESH_MS = 5000;
  // Each rank's plotted p50 is a latency query of its own: at most this
  // many ranks, and this many steps each.
  const PLOTTED_RANKS = 32;
  const LATENCY_STEPS = 300;
  const WINDOWS = { '5m': true, '1h': true, '1d': true };
  // The window is kept in the address's fragment (#window=1h).
  const state = { window: 'all' };

  function renderIdentity(doc) {
    const running = doc.runs.filter((r) => r.state === 'running').length;
    const jobState = running > 0 ? 'running' : 'finished';
    document.title = 'mlmond: job ' + mlmon.plain(doc.job_id);
    clear(document.getElementById('title')).append('job ', bdi(doc.job_id, { class: 'job-id' }), ' ',
      el('span', { class: 'state ' + jobState }, jobState));
    const ranks = new Set(doc.runs.filter((r) => r.rank !== null).map((r) => r.rank));
    const d = clear(document.getElementById('ident'));
    for (const [k, v] of [['job', bdi(doc.job_id)], ['state', jobState], ['runs', doc.runs.length + ' (' + running + ' running)'],
      ['ranks', String(ranks.size)], ['straggler threshold', known(doc.straggler_pct) ? doc.straggler_pct + '%' : '-']]) {
      d.append(el('dt', {}, k), el('dd', { 'data-field': k }, v));
    }
    return jobState === 'running';
  }

  function renderRuns(doc) {
    const tbody = clear(document.querySelector('#runs tbody'));
    for (const r of doc.runs) {
      tbody.append(el('tr', { 'data-run': r.id }, el('td', { class: 'rank' }, r.rank === null ? '-' : bdi(r.rank)),
        el('td', {}, el('a', { href: '/runs/' + r.id }, String(r.id))),
        el('td', { class: 'name' }, el('a', { href: '/runs/' + r.id }, r.name ? bdi(r.name) : '-')),
        el('td', { class: 'num' }, String(r.pid)), el('td', {}, el('span', { class: 'state ' + r.state }, r.state)),
        el('td', {}, mlmon.fmtTime(r.registered_ts)), el('td', {}, mlmon.fmtTime(r.ended_ts))));
    }
  }

  function renderStragglers(doc) {
    const sec = clear(document.getElementById('stragglers'));
    const n = doc.stragglers.length;
    sec.hidden = n === 0;
    if (n === 0) return;
    sec.className = 'leak-box suspected';
    sec.append(el('strong', {}, n + (n === 1 ? ' straggler' : ' stragglers')));
    const ul = el('ul', { class: 'reasons' });
    for (const s of doc.stragglers) ul.append(el('li', { class: 'reason', 'data-run': s.run }, bdi(s.reason || '')));
    sec.append(ul);
  }

  // Per op, one row per rank: count, p50, p99, p50 against the job's merged
  // p50 (as mlmonctl report --job prints it), a bar of its p50 and the flag.
  function renderRanks(doc) {
    const box = clear(document.getElementById('ranks'));
    const heads = ['Rank', 'Run', 'Count', 'p50', 'p99', 'p50 vs job', 'p50, to scale', ''];
    const ops = mlmon.sortedOps(doc.ops);
    if (ops.length === 0) box.append(el('p', { class: 'dim' }, 'no timings in this span'));
    for (const { name } of ops) {
      const rows = (doc.ranks || {})[name] || [];
      const jobP50 = doc.ops[name].p50_ms;
      const slow = new Map(doc.stragglers.filter((s) => s.op === name).map((s) => [s.run, s]));
      const max = Math.max(0, ...rows.map((r) => (known(r.p50_ms) ? r.p50_ms : 0)));
      const tbody = el('tbody');
      for (const r of rows) {
        const s = slow.get(r.run);
        const fill = el('div', { class: 'bar-fill' + (s ? ' slow' : '') });
        if (known(r.p50_ms) && max > 0) fill.style.width = (r.p50_ms / max * 100).toFixed(1) + '%';
        const vs = known(r.p50_ms) && known(jobP50) && jobP50 > 0 ? (r.p50_ms / jobP50 - 1) * 100 + 0 : null;
        const num = (t, k) => el('td', { class: 'num', 'data-field': k }, t);
        tbody.append(el('tr', { 'data-run': r.run, 'data-rank-of': name, class: s ? 'straggler' : null },
          el('td', { 'data-field': 'rank' }, r.rank === null ? '-' : bdi(r.rank)),
          el('td', {}, el('a', { href: '/runs/' + r.run }, String(r.run))),
          num(known(r.count) ? r.count.toFixed(0) : '-', 'count'), num(mlmon.fmtMs(r.p50_ms), 'p50'),
          num(mlmon.fmtMs(r.p99_ms), 'p99'), num(vs === null ? '-' : (vs >= 0 ? '+' : '') + vs.toFixed(1) + '%', 'vs_job'),
          el('td', { class: 'bar-cell' }, el('div', { class: 'bar', title: 'p50 ' + mlmon.fmtMs(r.p50_ms) }, fill)),
          el('td', {}, s ? el('span', { class: 'flag leak', title: mlmon.plain(s.reason || '') }, 'STRAGGLER') : null)));
      }
      const op = el('div', { class: 'job-op', 'data-op': name }, el('h3', {}, bdi(name)),
        el('table', { class: 'grid ranks' }, el('thead', {}, el('tr', {}, ...heads.map((h, i) => el('th', { class: i >= 2 && i <= 5 ? 'num' : null }, h)))), tbody));
      for (const s of slow.values()) op.append(el('p', { class: 'reason', 'data-run': s.run }, bdi(s.reason || '')));
      box.append(op);
    }
  }

  // Per op, each rank's p50 over the span (GET /v1/runs/ID/latency?step=
  // of each run), one line per rank.
  async function renderPlots(doc) {
    const runs = doc.runs.slice(0, PLOTTED_RANKS);
    const lStep = Math.max(1000, Math.ceil((doc.until - doc.from) / LATENCY_STEPS / 1000) * 1000);
    const lats = await Promise.all(runs.map((r) => mlmon.get('/v1/runs/' + r.id + '/latency?from=' + doc.from +
      '&until=' + doc.until + '&q=50&step=' + lStep + 'ms')));
    const box = clear(document.getElementById('plots'));
    const names = runs.map((r) => (r.rank === null ? 'run ' + r.id : ['rank ', r.rank]));
    for (const { name } of mlmon.sortedOps(doc.ops)) {
      const byTs = new Map();
      lats.forEach((lat, i) => {
        for (const st of lat.steps || []) {
          if (!byTs.has(st.ts)) byTs.set(st.ts, runs.map(() => null));
          const o = st.ops[name];
          if (o && known(o.p50_ms)) byTs.get(st.ts)[i] = o.p50_ms;
        }
      });
      const rows = [...byTs.keys()].sort((a, b) => a - b).map((ts) => [new Date(ts)].concat(byTs.get(ts)));
      mlmon.plot(box, { title: [bdi(name), ': p50 per rank'], names, rows, fmt: (v) => mlmon.fmtMs(v), opts: { includeZero: false } });
    }
  }

  async function load() {
    const q = WINDOWS[state.window] ? '&window=' + state.window : '';
    const doc = await mlmon.get('/v1/jobs/' + encodeURIComponent(jobId) + '?q=50,90,99' + q);
    const running = renderIdentity(doc);
    renderStragglers(doc);
    renderRuns(doc);
    document.getElementById('span').textContent = mlmon.fmtTime(doc.from) + ' to ' + mlmon.fmtTime(doc.until);
    const spanS = (doc.until - doc.from) / 1000, ranks = doc.runs.filter((r) => r.since_mark_ts !== null).length;
    mlmon.reportTable(document.getElementById('report'), doc.ops, spanS, spanS * ranks,
      ranks === 1 ? 'the span\u2019s wall time' : 'the wall time of the span times its ' + ranks + ' runs');
    renderRanks(doc);
    if (mlmon.chartsAvailable()) await renderPlots(doc);
    document.getElementById('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
    return running;
  }

  // Loads the page now, then every REFRESH_MS while load() says it is running.
  const refresh = mlmon.refresher(load, ['job \u201c', jobId, '\u201d'], REFRESH_MS);

  function select(win) {
    state.window = WINDOWS[win] ? win : 'all';
    for (const b of document.querySelectorAll('#windows button')) b.classList.toggle('on', b.dataset.window === state.window);
    history.replaceState(null, '', '#window=' + state.window);
    refresh();
  }

  for (const b of document.querySelectorAll('#windows button')) b.addEventListener('click', () => select(b.dataset.window));
  mlmon.showMissingLibrary();
  select(new URLSearchParams(location.hash.slice(1)).get('window'));
})();
