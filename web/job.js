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
  // The window and the attempt are kept in the address's fragment
  // (#window=1h&attempt=0; no attempt: the latest).
  const state = { window: 'all', attempt: null };

  function renderIdentity(doc) {
    const running = doc.runs.filter((r) => r.state === 'running').length;
    const jobState = doc.state || (running > 0 ? 'running' : 'finished');
    document.title = 'mlmond: job ' + mlmon.plain(doc.job_id);
    clear(document.getElementById('title')).append('job ', bdi(doc.job_id, { class: 'job-id' }), ' ',
      el('span', { class: 'state ' + jobState }, jobState));
    const ranks = new Set(doc.runs.filter((r) => r.rank !== null).map((r) => r.rank));
    const d = clear(document.getElementById('ident'));
    for (const [k, v] of [['job', bdi(doc.job_id)], ['state', jobState], ['runs', doc.runs.length + ' (' + running + ' running)'],
      ['ranks', String(ranks.size)], ['on this host', doc.view || '-'],
      ['attempt', String(doc.attempt) + (doc.attempts.length > 1 ? ' of ' + doc.attempts.length : '')],
      ['ended', doc.end_reason ? bdi(doc.end_reason) : '-'],
      ['straggler threshold', known(doc.straggler_pct) ? doc.straggler_pct + '%' : '-'],
      ['score threshold', known(doc.score_threshold) ? String(doc.score_threshold) : '-']]) {
      d.append(el('dt', {}, k), el('dd', { 'data-field': k }, v));
    }
    return jobState !== 'finished';
  }

  // A stalled job: since when no rank completed a step, and the ranks that
  // hold it, each with its reason.
  function renderStalled(doc) {
    const sec = clear(document.getElementById('stalled'));
    sec.hidden = doc.state !== 'stalled';
    if (sec.hidden) return;
    sec.className = 'leak-box suspected';
    sec.append(el('strong', {}, 'Stalled: no rank has completed ' + doc.stall.step_op + ' since ' + mlmon.fmtTime(doc.stalled_since)),
      ' ', el('span', { class: 'dim' }, '(more than ' + mlmon.fmtMs(doc.stall.threshold_ms) + ', ten times its p99 or the floor)'));
    const ul = el('ul', { class: 'reasons' });
    for (const r of doc.stalled_ranks) ul.append(el('li', { class: 'reason', 'data-run': r.run }, bdi(r.reason || '')));
    sec.append(ul);
  }

  // One button per attempt of an elastic job, with how it ended.
  function renderAttempts(doc) {
    const box = clear(document.getElementById('attempts'));
    box.hidden = doc.attempts.length < 2;
    for (const a of doc.attempts) {
      const b = el('button', { type: 'button', class: a.attempt === doc.attempt ? 'on' : null, title: mlmon.plain(a.end_reason || a.state) },
        'attempt ' + a.attempt + (a.state === 'running' ? ' (running)' : ''));
      b.addEventListener('click', () => select(state.window, a.attempt));
      box.append(b);
    }
  }

  function renderRuns(doc) {
    const tbody = clear(document.querySelector('#runs tbody'));
    for (const r of doc.runs) {
      tbody.append(el('tr', { 'data-run': r.id }, el('td', { class: 'rank' }, r.rank === null ? '-' : bdi(r.rank)),
        el('td', {}, el('a', { href: '/runs/' + r.id }, String(r.id))),
        el('td', { class: 'name' }, el('a', { href: '/runs/' + r.id }, r.name ? bdi(r.name) : '-')),
        el('td', { class: 'num' }, String(r.pid)), el('td', {}, el('span', { class: 'state ' + r.state }, r.state)),
        el('td', { 'data-field': 'process' }, el('span', { class: mlmon.badProcess(r) ? 'state ' + r.proc_state : null }, mlmon.processText(r))),
        el('td', {}, mlmon.fmtTime(r.registered_ts)), el('td', {}, mlmon.fmtTime(r.ended_ts))));
    }
  }

  function renderStragglers(doc) {
    const sec = clear(document.getElementById('stragglers'));
    const n = doc.stragglers.length;
    const undecided = doc.undecided || [];
    sec.hidden = n === 0 && undecided.length === 0;
    if (sec.hidden) return;
    sec.className = 'leak-box' + (n ? ' suspected' : '');
    sec.append(el('strong', {}, n ? n + (n === 1 ? ' straggler' : ' stragglers') : 'Cannot tell which rank is slow'));
    const ul = el('ul', { class: 'reasons' });
    for (const s of doc.stragglers) ul.append(el('li', { class: 'reason', 'data-run': s.run }, bdi(s.reason || '')));
    for (const u of undecided) ul.append(el('li', { class: 'reason undecided' }, bdi(u.reason || '')));
    sec.append(ul);
  }

  // Per op, one row per rank: count, p50, p99, p50 against the other ranks'
  // (the figure the verdict compares with, as mlmonctl report --job prints
  // it), NVIDIA's relative and individual scores, a bar of its p50 and the
  // verdict.
  function renderRanks(doc) {
    const box = clear(document.getElementById('ranks'));
    const heads = ['Rank', 'Run', 'Count', 'p50', 'p99', 'p50 vs others', 'relative', 'individual', 'p50, to scale', ''];
    const collective = new Set(doc.collective_ops || []);
    const score = (v, flagged) => el('td', { class: 'num score' + (flagged && v < doc.score_threshold ? ' flagged' : '') },
      known(v) ? v.toFixed(3) : '-');
    const ops = mlmon.sortedOps(doc.ops);
    if (ops.length === 0) box.append(el('p', { class: 'dim' }, 'no timings in this span'));
    for (const { name } of ops) {
      const rows = (doc.ranks || {})[name] || [];
      const slow = new Map(doc.stragglers.filter((s) => s.op === name).map((s) => [s.run, s]));
      const max = Math.max(0, ...rows.map((r) => (known(r.p50_ms) ? r.p50_ms : 0)));
      const tbody = el('tbody');
      for (const r of rows) {
        const s = slow.get(r.run);
        const fill = el('div', { class: 'bar-fill' + (s ? ' slow' : '') });
        if (known(r.p50_ms) && max > 0) fill.style.width = (r.p50_ms / max * 100).toFixed(1) + '%';
        const vs = known(r.vs_others_pct) ? r.vs_others_pct + 0 : null;
        const num = (t, k) => el('td', { class: 'num', 'data-field': k }, t);
        tbody.append(el('tr', { 'data-run': r.run, 'data-rank-of': name, class: s ? 'straggler' : null },
          el('td', { 'data-field': 'rank' }, r.rank === null ? '-' : bdi(r.rank)),
          el('td', {}, el('a', { href: '/runs/' + r.run }, String(r.run))),
          num(known(r.count) ? r.count.toFixed(0) : '-', 'count'), num(mlmon.fmtMs(r.p50_ms), 'p50'),
          num(mlmon.fmtMs(r.p99_ms), 'p99'), num(vs === null ? '-' : (vs >= 0 ? '+' : '') + vs.toFixed(1) + '%', 'vs_others'),
          score(r.relative_score, r.score_flagged), score(r.individual_score, r.score_flagged),
          el('td', { class: 'bar-cell' }, el('div', { class: 'bar', title: 'p50 ' + mlmon.fmtMs(r.p50_ms) }, fill)),
          el('td', {}, s ? el('span', { class: 'flag leak', title: mlmon.plain(s.reason || '') }, s.kind === 'waited_for' ? 'WAITED FOR' : 'STRAGGLER') : null)));
      }
      const op = el('div', { class: 'job-op', 'data-op': name },
        el('h3', {}, bdi(name), collective.has(name) ? ' (holds a collective: the others wait for the fastest)' : ''),
        el('table', { class: 'grid ranks' }, el('thead', {}, el('tr', {}, ...heads.map((h, i) => el('th', { class: i >= 2 && i <= 5 ? 'num' : null }, h)))), tbody));
      for (const s of slow.values()) op.append(el('p', { class: 'reason', 'data-run': s.run }, bdi(s.reason || '')));
      box.append(op);
    }
  }

  // Per op, each rank's p50 over the span (GET /v1/runs/ID/latency?step=
  // of each run), one line per rank.
  async function renderPlots(doc) {
    const runs = doc.runs.filter((r) => !r.launcher).slice(0, PLOTTED_RANKS);
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
    const q = (WINDOWS[state.window] ? '&window=' + state.window : '') + (state.attempt === null ? '' : '&attempt=' + state.attempt);
    const doc = await mlmon.get('/v1/jobs/' + encodeURIComponent(jobId) + '?q=50,90,99' + q);
    const running = renderIdentity(doc);
    renderStalled(doc);
    renderAttempts(doc);
    renderStragglers(doc);
    renderRuns(doc);
    document.getElementById('span').textContent = mlmon.fmtTime(doc.from) + ' to ' + mlmon.fmtTime(doc.until);
    const spanS = (doc.until - doc.from) / 1000, ranks = doc.runs.filter((r) => !r.launcher && r.since_mark_ts !== null).length;
    mlmon.reportTable(document.getElementById('report'), doc.ops, spanS, spanS * ranks,
      ranks === 1 ? 'the span\u2019s wall time' : 'the wall time of the span times its ' + ranks + ' runs');
    renderRanks(doc);
    await mlmon.goodput(document.getElementById('goodput'), '/v1/jobs/' + encodeURIComponent(jobId), q.slice(1),
      doc.until - doc.from, null);
    if (mlmon.chartsAvailable()) await renderPlots(doc);
    document.getElementById('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
    return running;
  }

  // Loads the page now, then every REFRESH_MS while load() says it is running.
  const refresh = mlmon.refresher(load, ['job \u201c', jobId, '\u201d'], REFRESH_MS);

  function select(win, attempt) {
    state.window = WINDOWS[win] ? win : 'all';
    state.attempt = /^[0-9]+$/.test(String(attempt)) ? Number(attempt) : null;
    for (const b of document.querySelectorAll('#windows button')) b.classList.toggle('on', b.dataset.window === state.window);
    history.replaceState(null, '', '#window=' + state.window + (state.attempt === null ? '' : '&attempt=' + state.attempt));
    refresh();
  }

  for (const b of document.querySelectorAll('#windows button')) b.addEventListener('click', () => select(b.dataset.window, state.attempt));
  mlmon.showMissingLibrary();
  const hash = new URLSearchParams(location.hash.slice(1));
  select(hash.get('window'), hash.get('attempt'));
})();
