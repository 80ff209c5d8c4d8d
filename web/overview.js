// SPDX-License-Identifier: MIT
// GET /: the host, and every running run with the recent finished ones.
'use strict';

(function () {
  const { el, clear, known } = mlmon;
  // Per-run detail (sparklines, the top op) costs two requests per run:
  // only the first ones get it, the rest show their latest sample.
  const DETAILED_RUNS = 100;
  const FINISHED_SHOWN = 20;
  const REFRESH_MS = 5000;
  // Each job's straggler flag costs a merge of its ranks: the running jobs
  // first, then the latest finished, this many in all.
  const JOBS_SHOWN = 20;

  function card(title, value, sub) {
    return el('div', { class: 'card' }, el('div', { class: 'card-title' }, title), el('div', { class: 'card-value' }, value),
      sub ? el('div', { class: 'dim' }, sub) : null);
  }

  function renderHost(sys) {
    const cards = clear(document.getElementById('host-cards'));
    const m = sys.memory || {};
    cards.append(card('CPU', mlmon.fmtPct(sys.cpu_pct), sys.ncpus + ' CPUs, load ' +
      (sys.load && known(sys.load.load1) ? sys.load.load1.toFixed(2) : '-')));
    cards.append(card('Memory', mlmon.fmtBytes(m.used_bytes), 'of ' + mlmon.fmtBytes(m.total_bytes) + ', ' +
      mlmon.fmtBytes(m.available_bytes) + ' available'));
    for (const d of sys.devices || []) {
      cards.append(card((d.kind || 'device').toUpperCase() + ' ' + (d.name || d.model || d.id || ''),
        mlmon.fmtPct(d.busy_pct), 'memory ' + mlmon.fmtBytes(d.mem_used_bytes) + ' of ' + mlmon.fmtBytes(d.mem_total_bytes)));
    }
  }

  function tagsText(tags) {
    return Object.entries(tags || {}).map(([k, v]) => k + '=' + v).join(' ');
  }

  // The op with the most timings in the last minute: [name, p99_ms, per_s].
  function topOp(lat) {
    let best = null;
    for (const [name, o] of Object.entries(lat.ops || {})) {
      if (!best || o.count > best[1].count) best = [name, o];
    }
    return best ? [best[0], best[1].p99_ms, best[1].count / lat.window_s] : null;
  }

  async function detail(run) {
    const id = run.id;
    const [samples, lat] = await Promise.all([
      mlmon.get('/v1/runs/' + id + '/samples?from=10m&step=10s&limit=100').catch(() => null),
      mlmon.get('/v1/runs/' + id + '/latency?window=1m&q=99').catch(() => null),
    ]);
    return { samples: samples ? samples.samples : [], top: lat ? topOp(lat) : null };
  }

  function row(run, d, leaking) {
    const s = run.latest || {};
    const link = el('a', { href: '/runs/' + run.id }, run.name || run.comm || String(run.id));
    const name = el('td', { class: 'name' }, link);
    if (leaking.has(run.id)) name.append(' ', el('span', { class: 'flag leak', title: 'leak verdict: suspected' }, 'leak suspected'));
    const num = (text) => el('td', { class: 'num' }, text);
    const cells = [el('td', {}, String(run.id)), name, el('td', {}, String(run.pid)), el('td', { class: 'tags', title: tagsText(run.tags) }, tagsText(run.tags)),
      el('td', {}, el('span', { class: 'state ' + run.state }, run.state),
        ...(mlmon.badProcess(run) ? [' ', el('span', { class: 'state ' + run.proc_state }, run.proc_state)] : [])),
      num(mlmon.fmtPct(s.cpu_pct))];
    cells.push(el('td', {}, d ? mlmon.sparkline(d.samples.map((x) => x.cpu_pct), 'CPU %, last 10 minutes') : null));
    cells.push(num(mlmon.fmtBytes(s.rss_bytes)));
    cells.push(el('td', {}, d ? mlmon.sparkline(d.samples.map((x) => x.rss_bytes), 'RSS, last 10 minutes') : null));
    cells.push(num(mlmon.fmtRate(s.read_bytes_per_s) + ' / ' + mlmon.fmtRate(s.write_bytes_per_s)),
      num(mlmon.fmtRate(s.netns_rx_bytes_per_s) + ' / ' + mlmon.fmtRate(s.netns_tx_bytes_per_s)));
    const top = d && d.top;
    cells.push(el('td', { class: 'op' }, top ? top[0] : '-'), num(top ? mlmon.fmtMs(top[1]) : '-'),
      num(top ? mlmon.fmtPerS(top[2]) : '-'));
    return el('tr', { 'data-run': run.id, class: leaking.has(run.id) ? 'leaking' : null }, ...cells);
  }

  async function renderJobs(list) {
    const live = (j) => j.state !== 'finished';
    const jobs = list.jobs.filter(live).reverse().concat(list.jobs.filter((j) => !live(j)).reverse()).slice(0, JOBS_SHOWN);
    const docs = await Promise.all(jobs.map((j) => mlmon.get('/v1/jobs/' + encodeURIComponent(j.job_id) + '?q=50').catch(() => null)));
    const tbody = clear(document.querySelector('#job-list tbody'));
    jobs.forEach((j, i) => {
      const n = docs[i] ? docs[i].stragglers.length : null;
      const flag = n === null ? '-' : n === 0 ? el('span', { class: 'dim' }, 'none')
        : el('span', { class: 'flag leak', title: docs[i].stragglers.map((s) => s.reason).join('\n') }, n + (n === 1 ? ' straggler' : ' stragglers'));
      tbody.append(el('tr', { 'data-job': j.job_id, class: n ? 'leaking' : null },
        el('td', { class: 'name' }, el('a', { href: '/jobs/' + encodeURIComponent(j.job_id) }, j.job_id)),
        el('td', { class: 'num' }, String(j.runs)), el('td', { class: 'num' }, String(j.ranks)),
        el('td', {}, el('span', { class: 'state ' + j.state }, j.state)), el('td', {}, mlmon.fmtTime(j.first_registered_ts)),
        el('td', { 'data-field': 'stragglers' }, flag)));
    });
    document.getElementById('jobs').hidden = jobs.length === 0;
  }

  async function refresh() {
    const [sys, list, leaks, jobs] = await Promise.all([
      mlmon.get('/v1/system'), mlmon.get('/v1/runs?state=all'), mlmon.get('/v1/leaks'), mlmon.get('/v1/jobs')]);
    renderHost(sys);
    await renderJobs(jobs);
    const leaking = new Set(leaks.runs.map((r) => r.id));
    const running = list.runs.filter((r) => r.state === 'running');
    const finished = list.runs.filter((r) => r.state !== 'running')
      .sort((a, b) => (b.ended_ts || 0) - (a.ended_ts || 0)).slice(0, FINISHED_SHOWN);
    const shown = running.concat(finished);
    const details = await Promise.all(shown.map((r, i) => (i < DETAILED_RUNS ? detail(r) : null)));
    const tbody = clear(document.querySelector('#runs tbody'));
    shown.forEach((r, i) => tbody.append(row(r, details[i], leaking)));
    document.getElementById('runs-note').textContent = running.length + ' running, ' + finished.length +
      ' recent finished shown' + (list.truncated ? ' (list truncated)' : '');
    document.getElementById('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
  }

  async function loop() {
    const err = document.getElementById('error');
    try {
      await refresh();
      err.hidden = true;
    } catch (e) {
      err.textContent = 'Cannot read the API: ' + e.message;
      err.hidden = false;
    }
    document.body.dataset.ready = '1';
    setTimeout(loop, REFRESH_MS);
  }

  loop();
})();
