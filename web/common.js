// SPDX-License-Identifier: MIT
// What the pages share: building elements (every value from a process is
// inserted as text, never as HTML, and isolated from the text around it),
// number formats (those of mlmonctl), the JSON API, plots and the note shown
// when the chart library is missing.
'use strict';

const mlmon = {};

// el('td', {class: 'num'}, 'text', child...): strings become text nodes.
mlmon.el = function (tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== null && v !== undefined) e.setAttribute(k, String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
  }
  return e;
};

// A string a process or a user supplied (a name, a tag, an op, a mark...),
// as text in a <bdi>: its direction is isolated from the text around it, so
// a right-to-left override inside it (U+202E) cannot make the rest of the
// line read differently.
mlmon.bdi = (s, attrs) => mlmon.el('bdi', attrs || {}, String(s));

// The same where no element can hold it (an attribute, an <option>, the
// document's title): the direction controls (U+202A-U+202E, U+2066-U+2069)
// shown as U+FFFD, so nothing in it changes the text beyond it.
mlmon.plain = (s) => String(s).replace(/[\u202a-\u202e\u2066-\u2069]/g, '\ufffd');

// A run's tags: each "key=value" isolated, one after the other.
mlmon.tagsText = (tags) => Object.entries(tags || {}).map(([k, v]) => k + '=' + v);
mlmon.tags = function (tags) {
  const f = document.createDocumentFragment();
  mlmon.tagsText(tags).forEach((t, i) => f.append(i ? ' ' : '', mlmon.bdi(t)));
  return f;
};

mlmon.clear = function (e) {
  while (e.firstChild) e.removeChild(e.firstChild);
  return e;
};

mlmon.known = (v) => typeof v === 'number' && isFinite(v);

// The formats of mlmonctl (client/output.c), so the page and the CLI agree.
mlmon.fmtBytes = function (v, suffix) {
  if (!mlmon.known(v)) return '-';
  suffix = suffix || '';
  const units = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  if (Math.abs(v) < 1024) return v.toFixed(0) + ' B' + suffix;
  let i = 0;
  v /= 1024;
  while (Math.abs(v) >= 1024 && i + 1 < units.length) { v /= 1024; i++; }
  if (Math.abs(v) >= 1023.95 && i + 1 < units.length) { v /= 1024; i++; }
  return v.toFixed(1) + ' ' + units[i] + suffix;
};
mlmon.fmtRate = (v) => mlmon.fmtBytes(v, '/s');

// Ticks of a byte axis (dygraphs' ticker): whole multiples of a power of
// two of bytes (512 B, 1 KiB, 2 KiB... 256 MiB...), never less than a byte,
// so that fmt (a byte format) labels each tick with its own value and no
// two alike (dygraphs' own ticks on a flat zero plot were 0.2, 0.4...:
// "0 B/s, 0 B/s, 1 B/s").
mlmon.byteTicker = (fmt) => function (min, max, pixels, opts) {
  const n = Math.max(1, Math.floor(pixels / (opts('pixelsPerLabel') || 30)));
  const step = Math.pow(2, Math.max(0, Math.ceil(Math.log2((max - min) / n))));
  const ticks = [];
  for (let v = Math.ceil(min / step) * step; v <= max && ticks.length <= n + 1; v += step) ticks.push({ v, label: fmt(v) });
  return ticks;
};
mlmon.fmtPct = (v) => (mlmon.known(v) ? v.toFixed(1) + '%' : '-');
mlmon.fmtSeconds = function (s) {
  if (!mlmon.known(s)) return '-';
  if (s < 60) return s.toFixed(2) + ' s';
  const t = Math.round(s), p = (n) => String(n).padStart(2, '0');
  const d = Math.floor(t / 86400), h = Math.floor(t / 3600) % 24, m = Math.floor(t / 60) % 60;
  if (d > 0) return d + 'd ' + p(h) + 'h ' + p(m) + 'm';
  if (h > 0) return h + 'h ' + p(m) + 'm ' + p(t % 60) + 's';
  return m + 'm ' + p(t % 60) + 's';
};
mlmon.fmtMs = function (ms) {
  if (!mlmon.known(ms)) return '-';
  const a = Math.abs(ms);
  if (a < 0.99995) return (ms * 1000).toFixed(1) + 'us';
  if (a < 999.995) return ms.toFixed(2) + 'ms';
  if (a < 59999.5) return (ms / 1000).toFixed(3) + 's';
  return mlmon.fmtSeconds(Math.round(ms / 1000));
};
mlmon.fmtPerS = function (v) {
  if (!mlmon.known(v)) return '-';
  if (v >= 1000) return v.toFixed(0);
  if (v >= 1 || v === 0) return v.toFixed(1);
  return String(Number(v.toPrecision(2)));
};
mlmon.fmtTime = (ms) => (mlmon.known(ms) ? new Date(ms).toLocaleString() : '-');
// A run's process: its state while it runs ("sleeping", "stopped"), how
// it ended once it has ("exit 1", "signal 9 (SIGKILL)"), else '-'.
const SIGNALS = { 1: 'SIGHUP', 2: 'SIGINT', 3: 'SIGQUIT', 6: 'SIGABRT', 9: 'SIGKILL', 11: 'SIGSEGV', 15: 'SIGTERM' };
mlmon.processText = function (run) {
  if (run.proc_state) return run.proc_state;
  if (mlmon.known(run.exit_signal)) return 'signal ' + run.exit_signal + (SIGNALS[run.exit_signal] ? ' (' + SIGNALS[run.exit_signal] + ')' : '');
  if (mlmon.known(run.exit_code)) return 'exit ' + run.exit_code;
  return '-';
};
// States that stop a job, as a flag beside the state.
mlmon.badProcess = (run) => ['stopped', 'disk-sleep', 'zombie'].includes(run.proc_state);

// GET of the JSON API; rejects with the API's own error message.
mlmon.get = async function (path) {
  const resp = await fetch(path, { headers: { Accept: 'application/json' } });
  const body = await resp.json();
  if (!resp.ok) throw new Error(body && body.error ? body.error.message : 'HTTP ' + resp.status);
  return body;
};

// The page of one run or of one job (web/page.html, for /runs/{id} and
// /jobs/{job_id}): when the address is the page of `name`, puts its
// template in <main> and returns true.
mlmon.page = function (name) {
  if (location.pathname.split('/')[1] !== name + 's') return false;
  document.querySelector('main').append(document.getElementById(name + '-page').content.cloneNode(true));
  return true;
};

mlmon.chartsAvailable = () => typeof Dygraph !== 'undefined';

// Says what to install when the chart library could not be loaded. With
// the library, switches its legend off: the pages draw their own legends as
// text, where dygraphs' would write HTML from the series names and set a
// style attribute the CSP refuses.
mlmon.showMissingLibrary = function () {
  if (mlmon.chartsAvailable()) Dygraph.PLUGINS = Dygraph.PLUGINS.filter((p) => p !== Dygraph.Plugins.Legend);
  const note = document.getElementById('missing');
  if (!note || mlmon.chartsAvailable()) return;
  mlmon.clear(note).append(
    'The charts need the JavaScript library dygraphs, which mlmond serves from Debian\'s package: ',
    mlmon.el('code', {}, 'apt-get install libjs-dygraphs'),
    ' (or point [http] javascript_dir in mlmond.conf at the directory that holds dygraphs/dygraph.min.js).');
  note.hidden = false;
};

// A small line of values on a canvas (no library needed): the overview's
// sparklines. Sets data-points to the number of values drawn.
mlmon.sparkline = function (values, title) {
  const c = mlmon.el('canvas', { width: 64, height: 20, class: 'spark', title: title });
  const pts = values.filter(mlmon.known);
  c.dataset.points = String(pts.length);
  if (pts.length === 0) return c;
  const ctx = c.getContext('2d');
  const max = Math.max(...pts), min = Math.min(0, ...pts), span = max - min || 1;
  const at = (v, i) => [(i / Math.max(1, values.length - 1)) * (c.width - 2) + 1, c.height - 2 - ((v - min) / span) * (c.height - 4)];
  ctx.strokeStyle = ctx.fillStyle = '#2a6fdb';
  ctx.lineWidth = 1.2;
  ctx.beginPath();
  values.forEach((v, i) => {
    if (!mlmon.known(v)) return;
    const [x, y] = at(v, i), joined = i > 0 && mlmon.known(values[i - 1]);
    if (joined) ctx.lineTo(x, y); else ctx.moveTo(x, y);
    // a point with no neighbour is a dot
    if (!joined && !mlmon.known(values[i + 1])) ctx.fillRect(x - 1, y - 1, 2.5, 2.5);
  });
  ctx.stroke();
  return c;
};

mlmon.colors = ['#2a6fdb', '#d9480f', '#2b8a3e', '#862e9c', '#e67700', '#0b7285'];

// The ops of a /latency (or job) answer in mlmonctl report's order:
// by category (uncategorised last), then by total time.
mlmon.sortedOps = function (opsObj) {
  const ops = Object.entries(opsObj || {}).map(([name, o]) => ({ name, o, cat: o.category }));
  return ops.sort((a, b) => {
    if (!a.cat !== !b.cat) return a.cat ? -1 : 1;
    if (a.cat && a.cat !== b.cat) return a.cat < b.cat ? -1 : 1;
    if (a.o.total_ms !== b.o.total_ms) return b.o.total_ms - a.o.total_ms;
    return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
  });
};

// The report table of mlmonctl report into box: per op (grouped by
// category) its count, times, percentiles, its share of the span's wall
// time and ops/s over spanS seconds. The share is the op's total time over
// wallS seconds (the span's wall time, or for a job all its ranks' wall
// time): ops nest (a training step around its data wait) and overlap
// (threads), so they are not parts of one whole and the column need not add
// up to 100 %; wallWhat says what wallS is, under the table.
mlmon.reportTable = function (box, opsObj, spanS, wallS, wallWhat) {
  const { el, known } = mlmon;
  mlmon.clear(box);
  const ops = mlmon.sortedOps(opsObj);
  if (ops.length === 0) {
    box.append(el('p', { class: 'dim' }, 'no timings in this span'));
    return;
  }
  const heads = ['Operation', 'Count', 'Total', 'Avg', 'Min', 'Max', 'p50', 'p90', 'p99', '% of wall', 'ops/s'];
  let table = null, cat;
  for (const x of ops) {
    if (!table || x.cat !== cat) {
      cat = x.cat;
      box.append(el('h3', {}, 'category ', cat ? mlmon.bdi(cat) : '(none)'));
      table = el('table', { class: 'grid report' }, el('thead', {}, el('tr', {}, ...heads.map((h, i) => el('th', { class: i ? 'num' : null }, h)))), el('tbody'));
      box.append(table);
    }
    const o = x.o, num = (t, k) => el('td', { class: 'num', 'data-field': k }, t);
    table.tBodies[0].append(el('tr', { 'data-op': x.name }, el('td', { class: 'op' }, mlmon.bdi(x.name)),
      num(known(o.count) ? o.count.toFixed(0) : '-', 'count'), num(mlmon.fmtMs(o.total_ms), 'total'),
      num(mlmon.fmtMs(o.mean_ms), 'avg'), num(mlmon.fmtMs(o.min_ms), 'min'), num(mlmon.fmtMs(o.max_ms), 'max'),
      num(mlmon.fmtMs(o.p50_ms), 'p50'), num(mlmon.fmtMs(o.p90_ms), 'p90'), num(mlmon.fmtMs(o.p99_ms), 'p99'),
      num(known(o.total_ms) && wallS > 0 ? (o.total_ms / 10 / wallS).toFixed(1) + '%' : '-', 'share'),
      num(spanS > 0 ? mlmon.fmtPerS(o.count / spanS) : '-', 'per_s')));
  }
  box.append(el('p', { class: 'dim note', id: 'share-note' }, '% of wall: each op\u2019s total time over ' + wallWhat + ' (' +
    mlmon.fmtSeconds(wallS) + '). An op timed inside another (a step inside a profiled block) or on several threads ' +
    'counts in full, so the column is not a split of one whole and need not add up to 100%.'));
};

// A page's refresh: runs load() (which renders, and resolves to true while
// what it shows is still running), shows its error as "Cannot show WHAT"
// (what: a string, or [text, a process's string, text]), marks the body
// ready and, while running (or, with always, whatever happened), runs again
// after ms. Calling it again starts over (a new window selected).
mlmon.refresher = function (load, what, ms, always) {
  let timer = null;
  return async function refresh() {
    clearTimeout(timer);
    const err = document.getElementById('error');
    let again = always;
    try {
      again = (await load()) || always;
      err.hidden = true;
    } catch (e) {
      const w = Array.isArray(what) ? [what[0], mlmon.bdi(what[1]), what[2]] : [what];
      mlmon.clear(err).append('Cannot show ', ...w, ': ', mlmon.plain(e.message));
      err.hidden = false;
    }
    document.body.dataset.ready = '1';
    if (again) timer = setTimeout(refresh, ms);
  };
};

// One plot appended to parent: a titled box with its own legend (names
// isolated, as text) and a Dygraph; data-points says how many points it
// drew. p: title (a string or a list of strings and nodes), names (each a
// string, or [text, a process's string]), rows
// ([Date, value or null per name]), fmt (the values' format), bytes (fmt
// is a byte format: round byte ticks), marks ([{ts, label}]: a line and a
// label each), underlay (more to draw under the lines), opts (more of
// dygraphs' options).
mlmon.plot = function (parent, p) {
  const { el, known } = mlmon;
  const chart = el('div', { class: 'chart' }), legend = el('div', { class: 'legend' });
  const box = el('div', { class: 'plot' }, el('h3', {}, ...[].concat(p.title)), chart, legend);
  const named = (n) => (Array.isArray(n) ? [n[0], mlmon.bdi(n[1])] : [mlmon.bdi(n)]);
  const plainName = (n) => (Array.isArray(n) ? n[0] + mlmon.plain(n[1]) : mlmon.plain(n));
  p.names.forEach((n, i) => legend.append(el('span', { class: 'swatch c' + (i % mlmon.colors.length) }), ...named(n), ' '));
  const value = el('span', { class: 'value' });
  legend.append(value);
  parent.append(box);
  const pts = p.rows.filter((r) => r.slice(1).some(known));
  box.dataset.points = '0';
  if (pts.length === 0) {
    chart.append(el('p', { class: 'dim' }, 'no data in this span'));
    return box;
  }
  const fmt = p.fmt, marks = p.marks || [], layer = el('div', { class: 'mark-labels' });
  const y = { axisLabelFormatter: fmt, valueFormatter: fmt, axisLabelWidth: 76 };
  if (p.bytes) y.ticker = mlmon.byteTicker(fmt);
  new Dygraph(chart, p.rows, Object.assign({
    labels: ['time'].concat(p.names.map((n, i) => 's' + i)),
    colors: p.names.map((n, i) => mlmon.colors[i % mlmon.colors.length]),
    legend: 'never',
    connectSeparatedPoints: false,
    height: 180,
    axisLabelFontSize: 11,
    axes: { x: { axisLabelWidth: 64 }, y },
    includeZero: true,
    highlightCallback: (e, x, points) => {
      value.textContent = new Date(x).toLocaleTimeString() + '  ' + points.map((q, i) => plainName(p.names[i]) + ' ' + fmt(q.yval)).join(', ');
    },
    unhighlightCallback: () => { value.textContent = ''; },
    underlayCallback: (ctx, area, g) => {
      ctx.save();
      if (p.underlay) p.underlay(ctx, area, g);
      ctx.fillStyle = '#c92a2a';
      for (const m of marks) {
        const x = g.toDomXCoord(m.ts);
        if (x >= area.x && x <= area.x + area.w) ctx.fillRect(x, area.y, 1, area.h);
      }
      ctx.restore();
    },
    drawCallback: (g) => mlmon.placeMarkLabels(g, layer, marks),
  }, p.opts || {}));
  chart.append(layer);
  mlmon.placeMarkLabels(null, layer, marks);
  box.dataset.points = String(pts.length);
  return box;
};

// The marks' labels as text over a chart: each beside its line (to its
// right, or to its left where it would pass the plot's right edge), in the
// highest row where it overlaps no other label. A label that finds no row
// is left out: its line stays, and the window selector lists the mark.
mlmon.placeMarkLabels = function (g, layer, marks) {
  const ROWS = 4, GAP = 4;
  if (!g) g = layer.graph;
  layer.graph = g;
  if (!g || !layer.isConnected) return;
  const area = g.getArea(), rows = [];
  mlmon.clear(layer);
  for (const m of [...marks].sort((a, b) => a.ts - b.ts)) {
    const x = g.toDomXCoord(m.ts);
    if (!(x >= area.x && x <= area.x + area.w)) continue;
    const label = mlmon.bdi(m.label, { class: 'mark-label' });
    layer.append(label);
    const w = label.offsetWidth, h = label.offsetHeight;
    let left = x + 3;
    if (left + w > area.x + area.w) left = x - 3 - w;
    left = Math.max(area.x, Math.min(left, area.x + area.w - w));
    let row = 0;
    while (row < ROWS && (rows[row] || []).some(([a, b]) => left < b + GAP && a < left + w + GAP)) row++;
    if (row === ROWS || (row + 1) * h > area.h) {
      label.remove();
      continue;
    }
    (rows[row] = rows[row] || []).push([left, left + w]);
    label.style.left = left + 'px';
    label.style.top = area.y + 1 + row * h + 'px';
  }
};
