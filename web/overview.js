// SPDX-License-Identifier: MIT
// GET /: the host, every running run with the latest finished ones, and the
// jobs. Two requests a refresh, whatever the number of runs: /v1/system and
// /v1/overview, which has each run's figures, its sparklines (a minute a
// point), its top op and its leak flags, and the jobs' stragglers.
'use strict';

(function () {
  const { el, clear, known, bdi } = mlmon;
  const REFRESH_MS = 5000;
  // 10 minutes of sparklines, the top op over the last minute, the 20 runs
  // that ended last, and 20 jobs (each one's stragglers cost a merge of its
  // ranks' histograms).
  const OVERVIEW = '/v1/overview?spark=10m&window=1m&finished=20&jobs=20';

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

  // A running run is flagged while its verdict is "suspected"; one that
  // ended, if a leak was suspected at any time while it ran.
  function leakFlag(run) {
    const l = run.leak || {};
    if (run.state === 'running' ? l.suspected !== true : l.detected !== true) return null;
    const why = run.state === 'running' ? 'leak verdict: suspected' : 'a leak was suspected while it ran';
    return el('span', { class: 'flag leak', title: mlmon.plain(why + (l.reason ? ': ' + l.reason : '')) }, 'leak suspected');
  }

  function row(run) {
    const s = run.latest || {}, spark = run.spark || {}, top = run.top_op;
    const link = el('a', { href: '/runs/' + run.id }, bdi(run.name || run.comm || String(run.id)));
    const flag = leakFlag(run);
    const name = el('td', { class: 'name' }, link, flag ? ' ' : null, flag);
    const num = (text) => el('td', { class: 'num' }, text);
    const tags = mlmon.tagsText(run.tags).join(' ');
    return el('tr', { 'data-run': run.id, class: flag ? 'leaking' : null },
      el('td', {}, String(run.id)), name, el('td', {}, String(run.pid)),
      el('td', { class: 'tags', title: mlmon.plain(tags) }, mlmon.tags(run.tags)),
      el('td', {}, el('span', { class: 'state ' + run.state }, run.state),
        ...(mlmon.badProcess(run) ? [' ', el('span', { class: 'state ' + run.proc_state }, run.proc_state)] : [])),
      num(mlmon.fmtPct(s.cpu_pct)),
      el('td', {}, mlmon.sparkline(spark.cpu_pct || [], 'CPU %, a minute a point, over the run\u2019s last 10 minutes')),
      num(mlmon.fmtBytes(s.rss_bytes)),
      el('td', {}, mlmon.sparkline(spark.rss_bytes || [], 'RSS, a minute a point, over the run\u2019s last 10 minutes')),
      num(mlmon.fmtRate(s.read_bytes_per_s) + ' / ' + mlmon.fmtRate(s.write_bytes_per_s)),
      num(mlmon.fmtRate(s.netns_rx_bytes_per_s) + ' / ' + mlmon.fmtRate(s.netns_tx_bytes_per_s)),
      el('td', { class: 'op' }, top ? bdi(top.op) : '-'), num(top ? mlmon.fmtMs(top.p99_ms) : '-'),
      num(top ? mlmon.fmtPerS(top.per_s) : '-'));
  }

  function renderJobs(jobs) {
    const tbody = clear(document.querySelector('#job-list tbody'));
    for (const j of jobs) {
      const n = j.stragglers ? j.stragglers.length : null;
      const flag = n === null ? '-' : n === 0 ? el('span', { class: 'dim' }, 'none')
        : el('span', { class: 'flag leak', title: mlmon.plain(j.stragglers.map((s) => s.reason).join('\n')) },
          n + (n === 1 ? ' straggler' : ' stragglers'));
      tbody.append(el('tr', { 'data-job': j.job_id, class: n ? 'leaking' : null },
        el('td', { class: 'name' }, el('a', { href: '/jobs/' + encodeURIComponent(j.job_id) }, bdi(j.job_id))),
        el('td', { class: 'num' }, String(j.runs)), el('td', { class: 'num' }, String(j.ranks)),
        el('td', {}, el('span', { class: 'state ' + j.state }, j.state)), el('td', {}, mlmon.fmtTime(j.first_registered_ts)),
        el('td', { 'data-field': 'stragglers' }, flag)));
    }
    document.getElementById('jobs').hidden = jobs.length === 0;
  }

  async function load() {
    const [sys, ov] = await Promise.all([mlmon.get('/v1/system'), mlmon.get(OVERVIEW)]);
    renderHost(sys);
    renderJobs(ov.jobs);
    const tbody = clear(document.querySelector('#runs tbody'));
    for (const r of ov.runs) tbody.append(row(r));
    const finished = ov.runs.length - ov.running;
    document.getElementById('runs-note').textContent = ov.running + ' running, ' + finished +
      ' recently finished shown' + (ov.truncated ? ' (list truncated)' : '') +
      (ov.jobs_total > ov.jobs.length ? '; ' + ov.jobs.length + ' of ' + ov.jobs_total + ' jobs shown' : '');
    document.getElementById('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
  }

  mlmon.refresher(load, 'the overview', REFRESH_MS, true)();
})();
