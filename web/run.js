// SPDX-License-Identifier: MIT
// GET /runs/{id}: one run's identity, summary, plots and report table, from
// the JSON API; refreshed while the run is running.
'use strict';

(function () {
  if (!mlmon.page('run')) return;
  const { el, clear, known, bdi } = mlmon;
  const id = Number(location.pathname.split('/')[2]);
  const REFRESH_MS = 5000;
  // Points per plot: about a screen's width; the API merges steps.
  const SAMPLE_POINTS = 1500;
  // Each latency step is a query of its own: fewer of them.
  const LATENCY_STEPS = 300;
  const WINDOWS = { '5m': 300e3, '1h': 3600e3, '1d': 86400e3 };
  // The window is kept in the address's fragment (#window=1h,
  // #since_mark=LABEL), so a view can be linked to and reloaded.
  const state = { window: 'all', mark: null, markLabel: null };

  function dl(pairs) {
    const d = clear(document.getElementById('ident'));
    for (const [k, v] of pairs) d.append(el('dt', {}, k), el('dd', {}, v));
  }

  // A string of the process's (isolated), or '-'.
  const text = (s) => (s ? bdi(s) : '-');

  function renderIdentity(run) {
    document.title = 'mlmond: ' + mlmon.plain(run.name || run.comm || 'run ' + run.id);
    clear(document.getElementById('title')).append(el('span', { class: 'run-name' }, bdi(run.name || run.comm || '')),
      ' ', el('span', { class: 'state ' + run.state }, run.state),
      ...(mlmon.badProcess(run) ? [' ', el('span', { class: 'state ' + run.proc_state }, run.proc_state)] : []));
    dl([['run', String(run.id)], ['name', text(run.name)], ['pid', String(run.pid)], ['process', mlmon.processText(run)],
      ['comm', text(run.comm)],
      ['command', text(run.cmdline)], ['tags', Object.keys(run.tags || {}).length ? mlmon.tags(run.tags) : '-'],
      ['registered', mlmon.fmtTime(run.registered_ts)], ['ended', mlmon.fmtTime(run.ended_ts)],
      ['interval', run.interval_ms + ' ms']]);
  }

  function renderSummary(run) {
    const s = run.summary || {}, box = clear(document.getElementById('summary'));
    const card = (t, v) => box.append(el('div', { class: 'card' }, el('div', { class: 'card-title' }, t), el('div', { class: 'card-value' }, v)));
    card('wall time', mlmon.fmtSeconds(s.wall_time_s));
    card('CPU time', mlmon.fmtSeconds(s.cpu_time_s));
    card('CPU avg', mlmon.fmtPct(s.cpu_util_avg_pct));
    card('peak RSS', mlmon.fmtBytes(s.peak_rss_bytes));
    card('final RSS', mlmon.fmtBytes(s.final_rss_bytes));
    // A tree's PSS (where measured): its shared pages divided among the
    // processes that map them, where the RSS sum counts them in each.
    const pss = known(s.peak_pss_bytes) || known(s.final_pss_bytes);
    if (pss) {
      card('peak PSS (footprint)', mlmon.fmtBytes(s.peak_pss_bytes));
      card('final PSS (footprint)', mlmon.fmtBytes(s.final_pss_bytes));
    }
    const note = document.getElementById('summary-note');
    note.hidden = !pss;
    note.textContent = pss ? 'PSS is the process tree\u2019s real memory footprint: each page shared by its processes ' +
      '(forked workers) counts once, split among them. RSS adds up each process\u2019s resident pages, so a shared ' +
      'page counts once per process that maps it.' : '';
    card('read', mlmon.fmtBytes(s.read_bytes));
    card('written', mlmon.fmtBytes(s.write_bytes));
    card('net rx (netns)', mlmon.fmtBytes(s.netns_rx_bytes));
    card('net tx (netns)', mlmon.fmtBytes(s.netns_tx_bytes));
    if (known(s.peak_gpu_mem_bytes)) card('peak GPU memory', mlmon.fmtBytes(s.peak_gpu_mem_bytes));
    if (known(s.gpu_util_avg_pct)) card('GPU avg', mlmon.fmtPct(s.gpu_util_avg_pct));
    card('threads max', known(s.threads_max) ? String(s.threads_max) : '-');
    if (known(s.energy_j)) card('energy', s.energy_j.toFixed(1) + ' J');
    const sec = document.getElementById('leak'), v = run.leak;
    clear(sec).className = v && v.suspected ? 'leak-box suspected' : 'leak-box';
    sec.hidden = !v;
    if (v) {
      sec.append(el('strong', {}, v.suspected ? 'Leak suspected' : 'No leak suspected'), ' ',
        el('span', { id: 'leak-reason' }, v.reason || ''));
    }
  }

  // [from, until] of the selected window, within the run's life.
  function span(run) {
    const until = run.state === 'running' ? Date.now() : run.ended_ts || (run.latest && run.latest.ts) || Date.now();
    let from = run.registered_ts;
    if (state.mark !== null) from = state.mark;
    else if (WINDOWS[state.window]) from = Math.max(from, until - WINDOWS[state.window]);
    return [Math.floor(from), Math.floor(until)];
  }

  const plot = (p, marks) => mlmon.plot(document.getElementById('plots'), Object.assign({ marks }, p));

  const bytesFmt = (v) => mlmon.fmtBytes(v);
  const rateFmt = (v) => mlmon.fmtRate(v);
  const pctFmt = (v) => mlmon.fmtPct(v);
  const msFmt = (v) => mlmon.fmtMs(v);
  const numFmt = (v) => (known(v) ? String(Number(v.toPrecision(4))) : '-');

  function series(samples, keys) {
    return samples.map((s) => [new Date(s.ts)].concat(keys.map((k) => (known(s[k]) ? s[k] : null))));
  }

  // The verdict's window shaded and its slope drawn on the memory plot.
  function leakOverlay(v, samples) {
    if (!v || !v.suspected || !known(v.window_s) || !known(v.slope_bytes_per_s) || samples.length === 0) return null;
    const end = samples[samples.length - 1].ts, start = end - v.window_s * 1000;
    const first = samples.find((s) => s.ts >= start && known(s[v.metric]));
    return function (ctx, area, g) {
      const x0 = g.toDomXCoord(start), x1 = g.toDomXCoord(end);
      ctx.fillStyle = 'rgba(201, 42, 42, 0.08)';
      ctx.fillRect(x0, area.y, x1 - x0, area.h);
      if (!first) return;
      ctx.strokeStyle = '#c92a2a';
      ctx.setLineDash([5, 4]);
      ctx.beginPath();
      ctx.moveTo(g.toDomXCoord(first.ts), g.toDomYCoord(first[v.metric]));
      ctx.lineTo(x1, g.toDomYCoord(first[v.metric] + v.slope_bytes_per_s * (end - first.ts) / 1000));
      ctx.stroke();
      ctx.setLineDash([]);
    };
  }

  function renderPlots(run, samples, gauges, lat, marks) {
    clear(document.getElementById('plots'));
    if (!mlmon.chartsAvailable()) return;
    plot({ title: 'CPU %', names: ['cpu'], rows: series(samples, ['cpu_pct']), fmt: pctFmt }, marks);
    // a tree's PSS where it was measured: its footprint, beside the RSS sum,
    // and its anonymous part, the series a tree's leak verdict judges. They
    // are read every pss_interval, not every sample: their lines join the
    // samples that have them.
    const mem = [['rss_bytes', 'RSS'], ['rss_anon_bytes', 'anonymous RSS']];
    if (samples.some((s) => known(s.pss_bytes))) mem.push(['pss_bytes', 'PSS (the tree\u2019s footprint)']);
    if (samples.some((s) => known(s.pss_anon_bytes))) mem.push(['pss_anon_bytes', 'anonymous PSS']);
    const sparse = Object.fromEntries(mem.map((m, i) => ['s' + i, { connectSeparatedPoints: i >= 2 }]));
    plot({ title: 'Memory', names: mem.map((m) => m[1]), rows: series(samples, mem.map((m) => m[0])), fmt: bytesFmt,
      bytes: true, underlay: leakOverlay(run.leak, samples), opts: { series: sparse } }, marks);
    if (samples.some((s) => known(s.gpu_mem_bytes))) {
      plot({ title: 'GPU memory', names: ['GPU memory'], rows: series(samples, ['gpu_mem_bytes']), fmt: bytesFmt, bytes: true,
        underlay: leakOverlay(run.leak && run.leak.gpu_mem, samples) }, marks);
    }
    if (samples.some((s) => known(s.gpu_util_pct))) {
      plot({ title: 'GPU utilisation', names: ['GPU'], rows: series(samples, ['gpu_util_pct']), fmt: pctFmt }, marks);
    }
    plot({ title: 'Disk I/O', names: ['read', 'write'], rows: series(samples, ['read_bytes_per_s', 'write_bytes_per_s']),
      fmt: rateFmt, bytes: true }, marks);
    plot({ title: 'Network (namespace)', names: ['rx', 'tx'],
      rows: series(samples, ['netns_rx_bytes_per_s', 'netns_tx_bytes_per_s']), fmt: rateFmt, bytes: true }, marks);
    const byName = new Map();
    for (const g of gauges) {
      if (!byName.has(g.name)) byName.set(g.name, []);
      byName.get(g.name).push([new Date(g.ts), known(g.value) ? g.value : null]);
    }
    for (const [name, rows] of byName) plot({ title: ['gauge ', bdi(name)], names: [name], rows, fmt: numFmt }, marks);
    for (const op of Object.keys(lat.ops)) {
      const steps = lat.steps || [];
      plot({ title: [bdi(op), ': latency'], names: ['p50', 'p90', 'p99'], rows: steps.map((s) => {
        const o = s.ops[op];
        return [new Date(s.ts), o ? o.p50_ms : null, o ? o.p90_ms : null, o ? o.p99_ms : null];
      }), fmt: msFmt }, marks);
      plot({ title: [bdi(op), ': ops/s'], names: ['ops/s'],
        rows: steps.map((s) => [new Date(s.ts), s.ops[op] ? s.ops[op].per_s : 0]), fmt: numFmt }, marks);
    }
  }

  function renderMarks(marks) {
    const sel = document.getElementById('since-mark');
    clear(sel).append(el('option', { value: '' }, '-'));
    for (const m of marks) sel.append(el('option', { value: String(m.ts), 'data-label': m.label }, mlmon.plain(m.label) + ' (' + new Date(m.ts).toLocaleTimeString() + ')'));
    sel.value = state.mark === null ? '' : String(state.mark);
  }

  // #since_mark=LABEL: the latest mark with that label, as the API's since_mark.
  function resolveMark(marks) {
    if (state.markLabel === null || state.mark !== null) return;
    const found = marks.filter((m) => m.label === state.markLabel).pop();
    if (!found) throw new Error('no mark \u201c' + state.markLabel + '\u201d');
    state.mark = found.ts;
  }

  async function load() {
    const base = '/v1/runs/' + id;
    const [run, mk] = await Promise.all([mlmon.get(base), mlmon.get(base + '/marks')]);
    resolveMark(mk.marks);
    const [from, until] = span(run);
    const range = 'from=' + from + '&until=' + until;
    const sStep = Math.ceil((until - from) / SAMPLE_POINTS);
    const lStep = Math.max(1000, Math.ceil((until - from) / LATENCY_STEPS / 1000) * 1000);
    const [smp, lat] = await Promise.all([
      mlmon.get(base + '/samples?' + range + '&limit=' + (SAMPLE_POINTS + 100) + (sStep > run.interval_ms ? '&step=' + sStep + 'ms' : '')),
      mlmon.get(base + '/latency?' + range + '&q=50,90,99&step=' + lStep + 'ms'),
    ]);
    renderIdentity(run);
    renderSummary(run);
    renderMarks(mk.marks);
    document.getElementById('span').textContent = mlmon.fmtTime(from) + ' to ' + mlmon.fmtTime(until) +
      (smp.truncated ? ' (truncated)' : '');
    renderPlots(run, smp.samples, smp.gauges, lat, mk.marks);
    mlmon.reportTable(document.getElementById('report'), lat.ops, lat.window_s, lat.window_s, 'the span\u2019s wall time');
    await mlmon.goodput(document.getElementById('goodput'), base, range, until - from, run);
    document.getElementById('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
    return run.state === 'running';
  }

  // Loads the page now, then every REFRESH_MS while load() says it is running.
  const refresh = mlmon.refresher(load, 'run ' + id, REFRESH_MS);

  function select(win, mark, markLabel) {
    state.window = win;
    state.mark = mark;
    state.markLabel = markLabel;
    for (const b of document.querySelectorAll('#windows button')) b.classList.toggle('on', b.dataset.window === win);
    const frag = markLabel !== null ? 'since_mark=' + encodeURIComponent(markLabel) : 'window=' + win;
    history.replaceState(null, '', '#' + frag);
    refresh();
  }

  function selectFromFragment() {
    const f = new URLSearchParams(location.hash.slice(1));
    if (f.has('since_mark')) select('mark', null, f.get('since_mark'));
    else select(WINDOWS[f.get('window')] ? f.get('window') : 'all', null, null);
  }

  for (const b of document.querySelectorAll('#windows button')) b.addEventListener('click', () => select(b.dataset.window, null, null));
  document.getElementById('since-mark').addEventListener('change', (e) => {
    const opt = e.target.selectedOptions[0];
    if (e.target.value) select('mark', Number(e.target.value), opt.dataset.label);
    else select('all', null, null);
  });
  mlmon.showMissingLibrary();
  selectFromFragment();
})();
