// SPDX-License-Identifier: MIT
// The goodput ledger on the run and job pages: the span's wall time split
// (startup, steps, data wait, checkpoints, evaluation, idle, lost, other) as
// one stacked bar per step of time, drawn on a canvas from
// GET .../goodput?step=, with the split's totals, and the verdicts beside
// the leak (input-bound, GPU idle, time to OOM) with their reasons.
'use strict';

(function () {
  const { el, clear, known } = mlmon;
  // The parts in the order they stack, bottom up, and their colours.
  const KINDS = [
    ['step_s', 'step', '#2b8a3e'], ['data_wait_s', 'data wait', '#e67700'], ['checkpoint_s', 'checkpoint', '#862e9c'],
    ['eval_s', 'eval', '#0b7285'], ['startup_s', 'startup', '#2a6fdb'], ['idle_s', 'idle', '#c92a2a'],
    ['lost_s', 'lost', '#5c3d2e'], ['other_s', 'other', '#adb5bd'],
  ];
  const BARS = 120; // bars per chart: each a step of the span
  const HEIGHT = 160;

  // The series as stacked bars, each bar's parts in proportion to its step.
  function draw(canvas, series) {
    const ctx = canvas.getContext('2d'), w = canvas.width, h = canvas.height;
    ctx.clearRect(0, 0, w, h);
    if (!series.length) return;
    const bw = w / series.length;
    series.forEach((p, i) => {
      const total = KINDS.reduce((a, [k]) => a + (known(p[k]) ? p[k] : 0), 0);
      let y = h;
      for (const [k, , colour] of KINDS) {
        if (!known(p[k]) || total <= 0) continue;
        const bh = (p[k] / total) * h;
        ctx.fillStyle = colour;
        ctx.fillRect(i * bw, y - bh, Math.max(1, bw - 1), bh);
        y -= bh;
      }
    });
  }

  function legend(doc) {
    const box = el('div', { class: 'legend' });
    for (const [k, name, colour] of KINDS) {
      const sw = el('span', { class: 'swatch' });
      sw.style.background = colour;
      const share = known(doc[k]) && doc.wall_s > 0 ? mlmon.fmtPct((100 * doc[k]) / doc.wall_s) : '-';
      box.append(sw, name + ' ' + mlmon.fmtSeconds(doc[k]) + ' (' + share + ')');
    }
    return box;
  }

  function headline(doc) {
    if (!known(doc.step_s)) return 'Goodput: no figures (' + (doc.reason || '-') + ')';
    let s = 'Goodput ' + mlmon.fmtPct(doc.goodput_pct) + ': ' + doc.steps + ' steps of \u201c' + doc.step_op +
      '\u201d, ideal step ' + mlmon.fmtMs(doc.ideal_step_ms) + ', over ' + mlmon.fmtSeconds(doc.wall_s);
    if (known(doc.energy_per_step_j)) s += '; ' + doc.energy_per_step_j.toPrecision(3) + ' J per step';
    return s;
  }

  // One verdict's line: flagged verdicts stand out like a suspected leak.
  function verdict(title, v, flagged) {
    const box = el('div', { class: flagged ? 'leak-box suspected' : 'leak-box' });
    box.append(el('strong', {}, title), ' ', el('span', {}, (v && v.reason) || 'not evaluated'));
    return box;
  }

  function verdicts(run) {
    const out = [];
    const oom = run.leak && run.leak.oom, gpuOom = run.leak && run.leak.gpu_mem && run.leak.gpu_mem.oom;
    if (oom) out.push(verdict(known(oom.eta_s) ? 'Time to OOM ' + mlmon.fmtSeconds(oom.eta_s) + ':' : 'Time to OOM:', oom, known(oom.eta_s)));
    if (gpuOom) out.push(verdict('Time to GPU OOM:', gpuOom, known(gpuOom.eta_s)));
    const ib = run.input_bound, gi = run.gpu_idle;
    out.push(verdict(ib && ib.flagged ? 'Input-bound:' : 'Not input-bound:', ib, ib && ib.flagged));
    out.push(verdict(gi && gi.flagged ? 'GPU held but idle:' : 'GPU idle:', gi, gi && gi.flagged));
    return out;
  }

  // Fills section with the ledger of base (/v1/runs/ID or /v1/jobs/ID) over
  // the span query says ("from=..&until=..", "window=1h", "" for all of it),
  // spanMs long, and the run's verdicts (run: its object, or null).
  mlmon.goodput = async function (section, base, query, spanMs, run) {
    const step = Math.max(1000, Math.ceil(spanMs / BARS / 1000) * 1000);
    const doc = await mlmon.get(base + '/goodput?' + (query ? query + '&' : '') + 'step=' + step + 'ms');
    clear(section).hidden = false;
    section.append(el('h2', {}, 'Goodput'), el('p', {}, headline(doc)));
    const plot = el('div', { class: 'plot' }), canvas = el('canvas', { width: 1000, height: HEIGHT });
    canvas.style.width = '100%';
    canvas.style.height = HEIGHT + 'px';
    plot.append(canvas, legend(doc));
    section.append(plot);
    draw(canvas, doc.series || []);
    if (run) section.append(...verdicts(run));
  };
})();
