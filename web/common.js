// SPDX-License-Identifier: MIT
// What both pages share: building elements (every value from a process is
// inserted as text, never as HTML), number formats (those of mlmonctl), the
// JSON API, plots and the note shown when the chart library is missing.
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

// GET of the JSON API; rejects with the API's own error message.
mlmon.get = async function (path) {
  const resp = await fetch(path, { headers: { Accept: 'application/json' } });
  const body = await resp.json();
  if (!resp.ok) throw new Error(body && body.error ? body.error.message : 'HTTP ' + resp.status);
  return body;
};

mlmon.chartsAvailable = () => typeof Dygraph !== 'undefined';

// Says what to install when the chart library could not be loaded.
mlmon.showMissingLibrary = function () {
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
  if (pts.length < 2) return c;
  const ctx = c.getContext('2d');
  const max = Math.max(...pts), min = Math.min(0, ...pts), span = max - min || 1;
  ctx.strokeStyle = '#2a6fdb';
  ctx.lineWidth = 1.2;
  ctx.beginPath();
  let first = true;
  values.forEach((v, i) => {
    if (!mlmon.known(v)) { first = true; return; }
    const x = (i / (values.length - 1)) * (c.width - 2) + 1, y = c.height - 2 - ((v - min) / span) * (c.height - 4);
    if (first) ctx.moveTo(x, y); else ctx.lineTo(x, y);
    first = false;
  });
  ctx.stroke();
  return c;
};

mlmon.colors = ['#2a6fdb', '#d9480f', '#2b8a3e', '#862e9c', '#e67700', '#0b7285'];
