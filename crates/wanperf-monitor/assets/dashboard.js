// wanperf central dashboard: grid (#/), pair page (#/pair/SRC/DST?from=..&to=..), events (#/events).
// Plain ES2020, no dependencies; charts are hand-written SVG. Every string from the server is
// passed through esc() before it reaches innerHTML.
'use strict';
(() => {
  const REFRESH_MS = 15000;
  const SPANS = [['1 h', 3600], ['6 h', 21600], ['24 h', 86400], ['7 d', 604800], ['30 d', 2592000], ['1 y', 31536000]];
  const STATUSES = new Set(['ok', 'warn', 'bad', 'unknown']);
  const LOSS_CLASSES = [ // upper bound (fraction, inclusive), colour, legend label
    [0, '#00a000', '0 %'], [0.02, '#1060ff', '0–2 %'], [0.05, '#9b30ff', '2–5 %'], [Infinity, '#e8000b', '> 5 %']];

  const $ = (sel) => document.querySelector(sel);
  const view = $('#view');
  const perfEl = $('#perf');
  const wp = (window.__wanperf = { gridMs: null, pairMs: null, gridRenderMs: null, pairRenderMs: null });
  const state = {
    gen: 0, timer: null, key: '', skew: 0, mesh: null, zoomStack: [], zoomPair: '',
    lastPair: null, dragging: null, skipPush: false,
  };

  // ---------- escaping and formatting ----------
  const ESC = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
  const esc = (s) => String(s ?? '').replace(/[&<>"']/g, (c) => ESC[c]);
  const fin = (v) => typeof v === 'number' && Number.isFinite(v);
  const enc = encodeURIComponent;
  const serverNow = () => Date.now() / 1000 + state.skew;
  const pairHash = (src, dst, q) => `#/pair/${enc(src)}/${enc(dst)}${q ? '?' + q : ''}`;

  function fmtTime(t, sec = false) {
    if (!fin(t)) return '—';
    const s = new Date(t * 1000).toISOString();
    return `${s.slice(0, 10)} ${s.slice(11, sec ? 19 : 16)} UTC`;
  }
  const fmtClock = (t) => new Date(t * 1000).toISOString().slice(11, 19) + ' UTC';
  function fmtAge(sec) {
    if (!fin(sec)) return 'unknown time';
    sec = Math.max(0, sec);
    if (sec < 90) return `${Math.round(sec)} s`;
    if (sec < 5400) return `${Math.round(sec / 60)} min`;
    if (sec < 172800) return `${Math.round(sec / 3600)} h`;
    return `${Math.round(sec / 86400)} d`;
  }
  function fmtSpan(sec) {
    if (sec < 120) return `${Math.round(sec)} s`;
    if (sec < 3600) return `${Math.round(sec / 60)} min`;
    if (sec < 259200) return `${+(sec / 3600).toFixed(1)} h`;
    return `${+(sec / 86400).toFixed(1)} d`;
  }
  function sig3(x) {
    const s = x.toPrecision(3);
    return s.includes('e') ? String(Math.round(x)) : s;
  }
  function fmtRate(bps) {
    if (!fin(bps)) return '—';
    if (bps === 0) return '0 bit/s';
    const a = Math.abs(bps);
    for (const [d, u] of [[1e9, 'Gbit/s'], [1e6, 'Mbit/s'], [1e3, 'kbit/s']]) {
      if (a >= d * 0.9995) return `${sig3(bps / d)} ${u}`;
    }
    return `${sig3(bps)} bit/s`;
  }
  function fmtLoss(f) {
    if (!fin(f)) return '—';
    const p = f * 100;
    if (p === 0) return '0 %';
    if (p < 0.01) return `${p.toPrecision(1)} %`;
    return `${p < 1 ? p.toFixed(2) : p < 10 ? p.toFixed(1) : p.toFixed(0)} %`;
  }
  function fmtMs(ms) {
    if (!fin(ms)) return '—';
    return `${Math.abs(ms) < 1 ? ms.toFixed(3) : Math.abs(ms) < 10 ? ms.toFixed(2) : ms.toFixed(1)} ms`;
  }
  function fmtBytes(b) {
    if (!fin(b)) return '—';
    if (b >= 1048576) return `${+(b / 1048576).toFixed(1)} MiB`;
    if (b >= 1024) return `${+(b / 1024).toFixed(1)} KiB`;
    return `${b} B`;
  }
  function fmtMetric(metric, v) {
    const m = String(metric || '').toLowerCase();
    if (m.startsWith('through') || m === 'tput' || m === 'bps') return fmtRate(v);
    if (m.startsWith('loss')) return fmtLoss(v);
    if (m.startsWith('rtt') || m.includes('delay') || m.includes('owd')) return fmtMs(v);
    return fin(v) ? sig3(v) : '—';
  }
  const st = (s) => (STATUSES.has(s) ? s : 'unknown');
  const byT = (a, b) => (a.t ?? 0) - (b.t ?? 0);
  const cmpStr = (a, b) => (a < b ? -1 : a > b ? 1 : 0);
  function lossColor(f) {
    if (!(f > 0)) return LOSS_CLASSES[0][1];
    return LOSS_CLASSES.find(([hi]) => f <= hi)[1];
  }

  // ---------- status line, perf marks, fetching ----------
  function setStatus(text, cls = '') {
    const el = $('#status');
    el.textContent = text;
    el.className = cls;
  }
  function markRefreshed() {
    const el = $('#refreshed');
    const now = Date.now() / 1000;
    el.textContent = `last refresh ${fmtClock(now)}`;
    el.dataset.t = String(now);
  }
  function setMesh(name) {
    if (name == null) return;
    state.mesh = String(name);
    $('#mesh-name').textContent = state.mesh;
    document.title = `${state.mesh} — wanperf central`;
  }
  // name-fetch-start → name-rendered is `${name}Ms` (fetch + parse + DOM + layout);
  // name-fetched → name-rendered is `${name}RenderMs` (DOM + layout only).
  function measure(name) {
    performance.mark(`${name}-rendered`);
    const span = (what, from) => {
      try {
        const m = performance.measure(what, from, `${name}-rendered`);
        return m ? m.duration : performance.getEntriesByName(what, 'measure').pop().duration;
      } catch (e) { return null; } // a mark is missing
    };
    const ms = span(name, `${name}-fetch-start`), draw = span(`${name}-draw`, `${name}-fetched`);
    if (ms != null) perfEl.dataset[`${name}Ms`] = String((wp[`${name}Ms`] = Math.round(ms * 10) / 10));
    if (draw != null) perfEl.dataset[`${name}RenderMs`] = String((wp[`${name}RenderMs`] = Math.round(draw * 10) / 10));
    return ms;
  }
  async function getJSON(url) {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), 30000);
    let r;
    try {
      r = await fetch(url, { cache: 'no-store', signal: ctl.signal, headers: { Accept: 'application/json' } });
    } catch (e) {
      throw new Error(`${url}: ${e.name === 'AbortError' ? 'timed out' : 'network error (' + e.message + ')'}`);
    } finally {
      clearTimeout(timer);
    }
    let body = null;
    try { body = await r.json(); } catch (e) { /* not JSON */ }
    if (!r.ok) throw new Error(`${url}: HTTP ${r.status}${body && body.error ? ' — ' + body.error : ''}`);
    if (body == null || typeof body !== 'object') throw new Error(`${url}: the answer is not JSON`);
    return body;
  }

  // ---------- routing ----------
  function parseHash() {
    const raw = location.hash.replace(/^#/, '') || '/';
    const qi = raw.indexOf('?');
    const path = qi < 0 ? raw : raw.slice(0, qi);
    const q = new URLSearchParams(qi < 0 ? '' : raw.slice(qi + 1));
    let parts;
    try { parts = path.split('/').filter(Boolean).map(decodeURIComponent); } catch (e) { parts = []; }
    if (parts[0] === 'pair' && parts.length >= 3) {
      const num = (k) => (q.has(k) && fin(+q.get(k)) ? +q.get(k) : null);
      let from = num('from'), to = num('to');
      if (from == null || to == null || !(to > from)) from = to = null;
      return { view: 'pair', src: parts[1], dst: parts[2], from, to, live: q.get('live') === '1' || from == null };
    }
    if (parts[0] === 'events') return { view: 'events' };
    return { view: 'grid' };
  }
  function route() {
    const r = parseHash();
    state.gen += 1;
    clearTimeout(state.timer);
    $('#nav-grid').classList.toggle('active', r.view === 'grid');
    $('#nav-events').classList.toggle('active', r.view === 'events');
    const key = r.view === 'pair' ? `pair\n${r.src}\n${r.dst}` : r.view;
    if (r.view === 'pair' && state.zoomPair !== key) { state.zoomStack = []; state.zoomPair = key; }
    if (key !== state.key) {
      view.innerHTML = `<div class="empty">Loading ${esc(r.view === 'pair' ? `${r.src} → ${r.dst}` : r.view)}…</div>`;
      state.key = '';
    } else {
      view.classList.add('busy-view');
    }
    load(r, state.gen, key);
  }
  async function load(r, gen, key) {
    setStatus(`loading ${r.view}`, 'busy');
    try {
      if (r.view === 'grid') await loadGrid(gen);
      else if (r.view === 'pair') await loadPair(r, gen);
      else await loadEvents(gen);
      if (gen !== state.gen) return;
      state.key = key;
      markRefreshed();
    } catch (e) {
      if (gen !== state.gen) return;
      console.error(e);
      const shown = state.key === key;
      setStatus(`Error: ${e.message}${shown ? ' — showing the previous data' : ''}; retrying in ${REFRESH_MS / 1000} s`, 'error');
      if (!shown) {
        view.innerHTML = `<div class="empty">Could not load this view: ${esc(e.message)}.<br>` +
          `Retrying every ${REFRESH_MS / 1000} s. <a href="#/">Grid</a> · <a href="#/events">Events</a></div>`;
      }
    } finally {
      if (gen === state.gen) {
        view.classList.remove('busy-view');
        state.timer = setTimeout(() => refresh(gen), REFRESH_MS);
      }
    }
  }
  function refresh(gen) {
    if (gen !== state.gen) return;
    if (state.dragging) { state.timer = setTimeout(() => refresh(gen), 2000); return; }
    const r = parseHash();
    if (r.view === 'pair' && r.live && r.from != null) { // a "last N hours" zoom follows the clock
      const span = r.to - r.from;
      r.to = Math.round(serverNow());
      r.from = r.to - span;
      history.replaceState(null, '', pairHash(r.src, r.dst, `from=${r.from}&to=${r.to}&live=1`));
    }
    load(r, gen, r.view === 'pair' ? `pair\n${r.src}\n${r.dst}` : r.view);
  }

  // ---------- grid ----------
  async function loadGrid(gen) {
    performance.mark('grid-fetch-start');
    const g = await getJSON('/api/v1/grid');
    if (gen !== state.gen) return;
    performance.mark('grid-fetched');
    setMesh(g.mesh);
    if (fin(g.generated)) state.skew = g.generated - Date.now() / 1000;
    const wrap = $('#grid-wrap');
    const scroll = wrap ? [wrap.scrollLeft, wrap.scrollTop] : null;
    const counts = renderGrid(g);
    const table = $('#grid');
    void table.offsetHeight; // include layout in the measurement
    const ms = measure('grid');
    if (scroll) { const w = $('#grid-wrap'); w.scrollLeft = scroll[0]; w.scrollTop = scroll[1]; }
    setStatus(`${counts.rows} × ${counts.cols} grid, ${counts.cells} paths: ${counts.ok} ok, ${counts.warn} warn, ` +
      `${counts.bad} bad, ${counts.unknown} unknown; data of ${fmtTime(g.generated, true)}` +
      (ms != null ? `; fetched and drawn in ${Math.round(ms)} ms (drawing ${Math.round(wp.gridRenderMs)} ms)` : ''));
  }

  function cellTitle(c, now) {
    const tp = c.throughput;
    const part = (label, o, f, extra = '') => (o && typeof o === 'object'
      ? `${label}: ${f(o.value)} (baseline ${f(o.baseline)}) — ${st(o.status)}${extra}`
      : `${label}: no data`);
    const tpExtra = tp && (tp.streams != null || tp.window != null)
      ? `, ${tp.streams ?? '?'} stream${tp.streams === 1 ? '' : 's'}, window ${fmtBytes(tp.window)}` : '';
    return [
      `${c.src} → ${c.dst}`,
      part('throughput', tp, fmtRate, tpExtra),
      part('loss', c.loss, fmtLoss),
      part('RTT', c.rtt, fmtMs),
      fin(c.updated) ? `updated ${fmtAge(now - c.updated)} ago` : 'never updated',
    ].map(esc).join('&#10;');
  }

  function hostNote(h, now) {
    const seen = fin(h.last_seen) ? `last seen ${fmtAge(now - h.last_seen)} ago` : 'never seen';
    return `${h.name}${h.site != null ? ` (site ${h.site})` : ''}${h.silent ? ', SILENT' : ''}, ${seen}`;
  }

  function renderGrid(g) {
    const now = fin(g.generated) ? g.generated : serverNow();
    const hosts = new Map();
    for (const h of g.hosts || []) if (h && h.name != null) hosts.set(String(h.name), { ...h, name: String(h.name) });
    const cells = new Map();
    const srcs = new Set(), dsts = new Set();
    for (const c of g.cells || []) {
      if (!c || c.src == null || c.dst == null) continue;
      cells.set(`${c.src}\n${c.dst}`, c);
      srcs.add(String(c.src)); dsts.add(String(c.dst));
      for (const n of [String(c.src), String(c.dst)]) if (!hosts.has(n)) hosts.set(n, { name: n, site: null });
    }
    const site = (h) => (h.site == null ? '' : String(h.site));
    const all = [...hosts.values()].sort((a, b) => cmpStr(site(a), site(b)) || cmpStr(a.name, b.name));
    const rows = all.filter((h) => srcs.has(h.name) || !dsts.has(h.name));
    const cols = all.filter((h) => dsts.has(h.name) || !srcs.has(h.name));
    const counts = { rows: rows.length, cols: cols.length, cells: 0, ok: 0, warn: 0, bad: 0, unknown: 0 };
    const rank = { unknown: 0, ok: 1, warn: 2, bad: 3 };

    const out = [];
    // callouts and silent hosts
    const silent = all.filter((h) => h.silent);
    const notes = (g.callouts || []).map((c) => `<li>${esc(c.text ?? `${c.name}: ${c.bad} of ${c.of} paths bad`)}</li>`);
    for (const h of silent) notes.push(`<li>${esc(h.name)} is silent: ${esc(fin(h.last_seen) ? `last seen ${fmtAge(now - h.last_seen)} ago` : 'never seen')}</li>`);
    if (notes.length) out.push(`<div id="callouts" class="callouts"><strong>Attention</strong><ul>${notes.join('')}</ul></div>`);
    out.push(`<div class="legend" id="grid-legend"><span class="item wide"><span class="leg3">` +
      `<b class="s-ok">T</b><b class="s-warn">L</b><b class="s-bad">R</b></span>` +
      `<span>each cell, left to right: <b>T</b>hroughput | <b>L</b>oss | <b>R</b>TT (row = source, column = destination)</span></span>` +
      ['ok', 'warn', 'bad', 'unknown'].map((s) => `<span class="item"><i class="sw s-${s}"></i>${s}${s === 'bad' ? ' (hatched)' : ''}</span>`).join('') +
      `<span class="item"><i class="sw s-diag"></i>same host</span><span class="item"><i class="sw s-none"></i>not measured</span></div>`);
    out.push('<div id="hover-info" class="muted">Point at a cell for its values, click it for the pair\'s history.</div>');

    // column headers: one row of sites, one row of host names
    const n = Math.max(rows.length, cols.length), cs = n <= 24 ? 26 : n <= 50 ? 18 : 14; // px per cell
    const h = [`<div class="grid-wrap" id="grid-wrap"><table id="grid" class="grid" style="--cs:${cs}px" data-rows="${rows.length}" data-cols="${cols.length}">`,
      '<thead><tr class="sites"><th class="corner" rowspan="2">from ↓<br>to →</th>'];
    const groups = [];
    for (let i = 0, j = 0; i < cols.length; i = j) {
      while (j < cols.length && site(cols[j]) === site(cols[i])) j++;
      groups.push([i, j - i, site(cols[i]) || '—']);
    }
    const vert = groups.some(([, k, label]) => k * (cs + 1) < label.length * 7 + 4) ? ' vert' : '';
    for (const [i, k, label] of groups) {
      h.push(`<th class="cs${vert}${i ? ' sg' : ''}" colspan="${k}" title="site ${esc(label)}"><span>${esc(label)}</span></th>`);
    }
    h.push('</tr><tr class="hosts">');
    const colSg = cols.map((c, i) => i > 0 && site(c) !== site(cols[i - 1]));
    cols.forEach((c, i) => {
      const sil = c.silent ? ` · silent ${fmtAge(now - c.last_seen)}` : '';
      h.push(`<th class="ch${colSg[i] ? ' sg' : ''}${c.silent ? ' silent' : ''}" data-host="${esc(c.name)}" title="${esc(hostNote(c, now))}"><span>${esc(c.name + sil)}</span></th>`);
    });
    h.push('</tr></thead><tbody>');
    const dstAttr = cols.map((c) => esc(c.name));
    rows.forEach((r, ri) => {
      const newSite = ri === 0 || site(r) !== site(rows[ri - 1]);
      const srcAttr = esc(r.name);
      h.push(`<tr${newSite && ri ? ' class="sg"' : ''}><th class="rh${r.silent ? ' silent' : ''}" data-host="${srcAttr}" title="${esc(hostNote(r, now))}">` +
        (newSite ? `<span class="site">${esc(site(r) || '—')}</span>` : '') + srcAttr +
        (r.silent ? ` <span class="sil">silent ${esc(fmtAge(now - r.last_seen))}</span>` : '') + '</th>');
      cols.forEach((c, ci) => {
        const sg = colSg[ci] ? ' sg' : '';
        if (c.name === r.name) { h.push(`<td class="c diag${sg}"></td>`); return; }
        const cell = cells.get(`${r.name}\n${c.name}`);
        if (!cell) {
          h.push(`<td class="c none${sg}" data-src="${srcAttr}" data-dst="${dstAttr[ci]}" title="${srcAttr} → ${dstAttr[ci]}: not measured"></td>`);
          return;
        }
        const s = [st(cell.throughput?.status), st(cell.loss?.status), st(cell.rtt?.status)];
        const worst = s.reduce((a, b) => (rank[b] > rank[a] ? b : a), 'unknown');
        counts.cells += 1; counts[worst] += 1;
        h.push(`<td class="c t-${s[0]} l-${s[1]} r-${s[2]}${sg}" data-src="${srcAttr}" data-dst="${dstAttr[ci]}" data-status="${worst}" title="${cellTitle(cell, now)}"></td>`);
      });
      h.push('</tr>');
    });
    h.push('</tbody></table></div>');
    out.push(h.join(''));

    const ev = (g.events || []).slice().sort(byT).reverse().slice(0, 10);
    out.push(`<h3>Recent events</h3>${eventsTable(ev, 'recent-events')}<p><a href="#/events">All events →</a></p>`);
    view.innerHTML = out.join('');
    return counts;
  }

  // ---------- events ----------
  function eventsTable(events, id) {
    const rows = events.map((e) => {
      const text = e.text ?? `${e.src} → ${e.dst} ${e.metric} ${e.kind}: ${fmtMetric(e.metric, e.before)} → ${fmtMetric(e.metric, e.after)}`;
      const kind = String(e.kind ?? '');
      return `<tr data-t="${esc(e.t)}"><td class="t">${esc(fmtTime(e.t))}</td>` +
        `<td class="pair"><a href="${esc(pairHash(e.src ?? '', e.dst ?? ''))}">${esc(e.src)} → ${esc(e.dst)}</a></td>` +
        `<td>${esc(e.metric)}</td><td><span class="kind ${esc(kind.replace(/[^a-z0-9_-]/gi, ''))}">${esc(kind)}</span></td>` +
        `<td>${esc(text)}</td></tr>`;
    });
    if (!rows.length) rows.push('<tr class="none"><td colspan="5" class="muted">No events.</td></tr>');
    return `<table id="${id}" class="events"><thead><tr><th>Time (UTC)</th><th>Pair</th><th>Metric</th>` +
      `<th>Kind</th><th>What happened</th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
  }

  async function loadEvents(gen) {
    const d = await getJSON('/api/v1/events?limit=200');
    if (gen !== state.gen) return;
    if (d.mesh) setMesh(d.mesh);
    const ev = (d.events || []).filter((e) => e && typeof e === 'object').sort(byT).reverse();
    view.innerHTML = `<h2>Events</h2><p class="muted">The ${ev.length} most recent events, newest first.</p>${eventsTable(ev, 'events-table')}`;
    setStatus(`${ev.length} events`);
  }

  // ---------- chart helpers ----------
  const TIME_STEPS = [60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800,
    345600, 604800, 1209600, 2592000, 5184000, 7776000, 15552000, 31536000];
  function timeTicks(t0, t1, maxTicks) {
    const step = TIME_STEPS.find((s) => (t1 - t0) / s <= maxTicks) || TIME_STEPS[TIME_STEPS.length - 1];
    const ticks = [];
    for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) ticks.push(t);
    return { step, ticks };
  }
  function timeLabel(t, step, span) {
    const s = new Date(t * 1000).toISOString();
    if (step >= 86400) return [span > 200 * 86400 ? s.slice(0, 10) : s.slice(5, 10), false];
    const hm = s.slice(11, 16);
    return hm === '00:00' ? [s.slice(5, 10), true] : [hm, false];
  }
  function niceTicks(lo, hi, n = 5) {
    if (!fin(lo) || !fin(hi)) { lo = 0; hi = 1; }
    if (!(hi > lo)) { const d = Math.abs(lo) * 0.1 || 1; lo -= d; hi += d; }
    const raw = (hi - lo) / n;
    const mag = 10 ** Math.floor(Math.log10(raw));
    const f = raw / mag;
    const step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * mag;
    const a = Math.floor(lo / step + 1e-9) * step, b = Math.ceil(hi / step - 1e-9) * step;
    const ticks = [];
    for (let v = a; v <= b + step / 2; v += step) ticks.push(v);
    const dec = Math.max(0, -Math.floor(Math.log10(step) + 1e-9) + (Number.isInteger(step / mag) ? 0 : 1));
    return { lo: a, hi: b, ticks, fmt: (v) => v.toFixed(dec) };
  }
  const quantile = (arr, q) => {
    if (!arr.length) return NaN;
    const s = arr.slice().sort((a, b) => a - b);
    return s[Math.min(s.length - 1, Math.floor(q * s.length))];
  };
  const f1 = (v) => (Math.round(v * 10) / 10).toString();

  // Opens an SVG chart: frame, grid lines, axes. Returns scales and the markup so far.
  function chart(id, w, h, from, to, yt, yTitle) {
    const m = { l: 62, r: 14, t: 10, b: 30 };
    const pw = w - m.l - m.r, ph = h - m.t - m.b;
    const x = (t) => m.l + ((t - from) / (to - from)) * pw;
    const y = (v) => m.t + ph - ((v - yt.lo) / (yt.hi - yt.lo)) * ph;
    const s = [`<svg id="${id}" class="chart" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}" data-from="${from}" data-to="${to}" data-ml="${m.l}" data-pw="${pw}">`,
      `<defs><clipPath id="clip-${id}"><rect x="${m.l}" y="${m.t}" width="${pw}" height="${ph}"/></clipPath></defs>`,
      `<rect class="plot-bg" x="${m.l}" y="${m.t}" width="${pw}" height="${ph}"/>`];
    for (const v of yt.ticks) {
      const yy = f1(y(v));
      s.push(`<line class="gl" x1="${m.l}" x2="${m.l + pw}" y1="${yy}" y2="${yy}"/><text x="${m.l - 6}" y="${f1(y(v) + 4)}" text-anchor="end">${yt.fmt(v)}</text>`);
    }
    s.push(`<text class="axis-title" transform="translate(13 ${m.t + ph / 2}) rotate(-90)" text-anchor="middle">${esc(yTitle)}</text>`);
    const { step, ticks } = timeTicks(from, to, Math.max(2, Math.floor(pw / 95)));
    for (const t of ticks) {
      const xx = f1(x(t));
      const [label, bold] = timeLabel(t, step, to - from);
      s.push(`<line class="gl" x1="${xx}" x2="${xx}" y1="${m.t}" y2="${m.t + ph}"/><line class="tk" x1="${xx}" x2="${xx}" y1="${m.t + ph}" y2="${m.t + ph + 5}"/>` +
        `<text x="${xx}" y="${m.t + ph + 17}" text-anchor="middle"${bold ? ' class="bold"' : ''}>${label}</text>`);
    }
    s.push(`<text class="axis-title" x="${m.l - 6}" y="${m.t + ph + 17}" text-anchor="end">UTC</text>`);
    return { x, y, m, pw, ph, s };
  }
  function nodata(c, text) {
    c.s.push(`<text class="nodata" x="${c.m.l + c.pw / 2}" y="${c.m.t + c.ph / 2}" text-anchor="middle">${esc(text)}</text>`);
  }
  function eventLines(c, events, from, to) {
    for (const e of events) {
      if (!fin(e.t) || e.t < from || e.t > to) continue;
      const xx = f1(c.x(e.t));
      const text = e.text ?? `${e.metric} ${e.kind}`;
      c.s.push(`<g class="event"><title>${esc(`${fmtTime(e.t)}: ${text}`)}</title>` +
        `<line class="event-line" x1="${xx}" x2="${xx}" y1="${c.m.t}" y2="${c.m.t + c.ph}"/>` +
        `<line class="event-hit" x1="${xx}" x2="${xx}" y1="${c.m.t}" y2="${c.m.t + c.ph}"/></g>`);
    }
  }
  function failureMarks(c, failures, from, to) {
    const yy = c.m.t + c.ph;
    for (const f of failures) {
      if (!fin(f.t) || f.t < from || f.t > to) continue;
      const xx = c.x(f.t);
      c.s.push(`<g class="failure"><title>${esc(`${fmtTime(f.t, true)}: ${f.kind ?? 'test'} ${f.status ?? 'failed'}${f.reason ? ' — ' + f.reason : ''}`)}</title>` +
        `<path d="M${f1(xx - 4)} ${f1(yy - 4)}L${f1(xx + 4)} ${f1(yy + 4)}M${f1(xx - 4)} ${f1(yy + 4)}L${f1(xx + 4)} ${f1(yy - 4)}"/></g>`);
    }
  }
  function closeChart(c) {
    c.s.push(`<rect class="sel" x="0" y="${c.m.t}" width="0" height="${c.ph}" visibility="hidden"/></svg>`);
    return c.s.join('');
  }
  // A polyline through [t, v] points, broken where v is missing.
  function linePath(c, pts) {
    let d = '', pen = false;
    for (const [t, v] of pts) {
      if (!fin(v)) { pen = false; continue; }
      d += `${pen ? 'L' : 'M'}${f1(c.x(t))} ${f1(c.y(v))}`;
      pen = true;
    }
    return d;
  }

  // ---------- pair page ----------
  async function loadPair(r, gen) {
    const q = new URLSearchParams({ src: r.src, dst: r.dst });
    if (r.from != null) { q.set('from', String(r.from)); q.set('to', String(r.to)); }
    performance.mark('pair-fetch-start');
    const d = await getJSON(`/api/v1/pair?${q}`);
    if (gen !== state.gen) return;
    performance.mark('pair-fetched');
    if (d.mesh) setMesh(d.mesh);
    if (r.from == null && fin(d.to)) state.skew = d.to - Date.now() / 1000;
    state.lastPair = { d, r };
    renderPair(d, r);
    void view.offsetHeight;
    const ms = measure('pair');
    setStatus(`${d.src} → ${d.dst}: ${(d.latency || []).length} latency slots, ${(d.throughput || []).length} throughput tests, ` +
      `${(d.failures || []).length} failures, ${(d.events || []).length} events` + (ms != null ? `; fetched and drawn in ${Math.round(ms)} ms` : ''));
  }

  function renderPair(d, r) {
    const src = d.src ?? r.src, dst = d.dst ?? r.dst;
    const from = fin(d.from) ? d.from : (r.from ?? serverNow() - 86400);
    const to = fin(d.to) && d.to > from ? d.to : (r.to ?? from + 86400);
    const span = to - from;
    const w = Math.max(560, Math.min(1600, view.clientWidth - 48));
    const lat = (d.latency || []).filter((s) => s && fin(s.t)).sort(byT);
    const tput = (d.throughput || []).filter((p) => p && fin(p.t)).sort(byT);
    const fails = (d.failures || []).filter((f) => f && fin(f.t));
    const events = (d.events || []).filter((e) => e && typeof e === 'object');
    const isTput = (f) => String(f.kind ?? '').toLowerCase().startsWith('through');
    const activeSpan = r.from == null ? 86400 : (r.live ? r.to - r.from : null);

    const out = [`<div class="pair-head"><h2 id="pair-title">${esc(src)} → ${esc(dst)}</h2>`,
      `<a id="reverse" href="${esc(pairHash(dst, src))}">reverse direction</a><a href="#/">← grid</a></div>`];
    // latest values
    const lastLat = [...lat].reverse().find((s) => fin(s.median));
    const lastTp = [...tput].reverse().find((p) => fin(p.bps));
    out.push(`<div id="pair-summary" class="muted">latest: ${lastLat ? `RTT median ${fmtMs(lastLat.median)}, loss ${fmtLoss(lastLat.loss)} (${fmtTime(lastLat.t)})` : 'no latency data'}; ` +
      `${lastTp ? `throughput ${fmtRate(lastTp.bps)} (${fmtTime(lastTp.t)})` : 'no throughput test'}</div>`);
    // zoom controls
    out.push('<div class="zoom" id="zoom">' + SPANS.map(([label, s]) =>
      `<button type="button" data-span="${s}"${activeSpan != null && Math.abs(activeSpan - s) < 2 ? ' class="active"' : ''}>${label}</button>`).join('') +
      `<span class="sep"></span><button type="button" id="zoom-back"${state.zoomStack.length ? '' : ' disabled'}>back</button>` +
      `<button type="button" id="zoom-reset"${r.from == null ? ' disabled' : ''}>reset</button>` +
      `<span id="range">${esc(fmtTime(from))} – ${esc(fmtTime(to))} (${fmtSpan(span)}${r.live ? ', following now' : ''})` +
      `${fin(d.slot_s) ? `, ${lat.length} slots of ${fmtSpan(d.slot_s)}` : ''} · drag on a chart to zoom in</span></div>`);

    // (a) smoke chart
    const mins = [], maxs = [], mids = [];
    for (const s of lat) {
      if (fin(s.min)) mins.push(s.min);
      if (fin(s.max)) maxs.push(s.max);
      for (const k of ['median', 'p25', 'p75', 'p90']) if (fin(s[k])) mids.push(s[k]);
    }
    let lo = Math.min(...mins, ...mids), hi = Math.max(quantile(maxs, 0.98) || -Infinity, ...mids);
    if (!fin(lo) || !fin(hi)) { lo = 0; hi = 1; }
    const padY = (hi - lo) * 0.05 || 0.5;
    const yt = niceTicks(Math.max(0, lo - padY), hi + padY, 6);
    const c = chart('smoke', w, 320, from, to, yt, 'RTT (ms)');
    c.s[0] = c.s[0].replace('class="chart"', 'class="chart draggable"');
    const cy = (v) => f1(c.y(Math.min(Math.max(v, yt.lo), yt.hi)));
    const slotS = fin(d.slot_s) && d.slot_s > 0 ? d.slot_s : (lat.length > 1 ? lat[1].t - lat[0].t : 60);
    const sw = Math.max(1, (slotS / span) * c.pw), mw = f1(Math.max(2, sw));
    c.s.push(`<g clip-path="url(#clip-smoke)" shape-rendering="crispEdges">`);
    for (const s of lat) {
      const xx = f1(c.x(s.t));
      const tip = `${fmtTime(s.t)} (${fmtSpan(slotS)}): median ${fmtMs(s.median)}, 25–75 % ${fmtMs(s.p25)} – ${fmtMs(s.p75)}, ` +
        `p90 ${fmtMs(s.p90)}, min ${fmtMs(s.min)}, max ${fmtMs(s.max)}; loss ${fmtLoss(s.loss)} of ${s.sent ?? '?'} probes`;
      let g = `<g class="slot" data-t="${s.t}"><title>${esc(tip)}</title>`;
      if (fin(s.min) && fin(s.max)) g += `<rect class="mm" x="${xx}" y="${cy(s.max)}" width="${f1(sw)}" height="${f1(Math.max(0.5, cy(s.min) - cy(s.max)))}"/>`;
      if (fin(s.p25) && fin(s.p75)) g += `<rect class="iq" x="${xx}" y="${cy(s.p75)}" width="${f1(sw)}" height="${f1(Math.max(0.5, cy(s.p25) - cy(s.p75)))}"/>`;
      if (fin(s.p90)) g += `<line class="p90" x1="${xx}" x2="${f1(c.x(s.t) + sw)}" y1="${cy(s.p90)}" y2="${cy(s.p90)}"/>`;
      if (fin(s.median)) g += `<rect class="med" x="${xx}" y="${f1(cy(s.median) - 1.25)}" width="${mw}" height="2.5" fill="${lossColor(s.loss)}"/>`;
      else if (s.loss > 0) g += `<rect class="lost" x="${xx}" y="${c.m.t}" width="${mw}" height="5" fill="${lossColor(s.loss)}"/>`;
      c.s.push(g + '</g>');
    }
    c.s.push('</g>');
    if (!lat.length) nodata(c, 'no latency measurements in this range');
    failureMarks(c, fails.filter((f) => !isTput(f)), from, to);
    eventLines(c, events, from, to);
    out.push(`<h3>Round-trip time</h3><div class="chart-box">${closeChart(c)}</div>`);
    out.push('<div class="legend" id="smoke-legend"><span class="item"><i class="sw" style="background:#d6d6d6"></i>min–max</span>' +
      '<span class="item"><i class="sw" style="background:#8d8d8d"></i>25–75 %</span><span class="item">median coloured by loss:</span>' +
      LOSS_CLASSES.map(([, col, label]) => `<span class="item"><span class="line-sw" style="border-color:${col}"></span>${label}</span>`).join('') +
      '<span class="item"><span class="dash-sw"></span>event</span><span class="item"><span class="x-sw">✕</span> failed test</span></div>');

    // (b) throughput chart, with the capacity runs (narrow link, available bandwidth) on it
    const caps = (d.capacity || []).filter((c) => c && fin(c.t) && fin(c.bps));
    const maxBps = Math.max(0, ...tput.map((p) => (fin(p.bps) ? p.bps : 0)), ...caps.map((c) => c.bps));
    const [div, unit] = maxBps >= 2e9 ? [1e9, 'Gbit/s'] : [1e6, 'Mbit/s'];
    const tyt = niceTicks(0, (maxBps / div) * 1.1 || 1, 4);
    const tc = chart('tput', w, 220, from, to, tyt, `throughput (${unit})`);
    tc.s[0] = tc.s[0].replace('class="chart"', 'class="chart draggable"');
    tc.s.push(`<g clip-path="url(#clip-tput)"><path class="tput-line" d="${linePath(tc, tput.map((p) => [p.t, fin(p.bps) ? p.bps / div : null]))}"/>`);
    for (const p of tput) {
      if (!fin(p.bps)) continue;
      const ok = (p.status ?? 'ok') === 'ok';
      const tip = [`${fmtTime(p.t, true)}: ${fmtRate(p.bps)}`, `${p.streams ?? '?'} stream${p.streams === 1 ? '' : 's'}, window ${fmtBytes(p.window)}`];
      if (fin(p.retransmits)) tip.push(`${p.retransmits} retransmits`);
      if (fin(p.rtt_ms)) tip.push(`RTT ${fmtMs(p.rtt_ms)}`);
      if (!ok || p.reason) tip.push(`${p.status}${p.reason ? ': ' + p.reason : ''}`);
      tc.s.push(`<circle class="point" cx="${f1(tc.x(p.t))}" cy="${f1(tc.y(p.bps / div))}" r="3.5" fill="${ok ? '#1f77b4' : '#e67e22'}" data-t="${p.t}"><title>${esc(tip.join(', '))}</title></circle>`);
    }
    for (const c of caps) {
      const x = f1(tc.x(c.t)), y = f1(tc.y(c.bps / div));
      const tip = [`${fmtTime(c.t, true)}: capacity ${fmtRate(c.bps)} (${fmtRate(c.low_bps)} – ${fmtRate(c.high_bps)})`];
      if (fin(c.available_bps)) tip.push(`available ${fmtRate(c.available_bps)}`);
      if (fin(c.bottleneck_ttl)) tip.push(`bottleneck: hop ${c.bottleneck_ttl}${c.bottleneck_address ? ' (' + c.bottleneck_address + ')' : ''}`);
      tc.s.push(`<path class="capacity-point" d="M${x} ${f1(y - 5)}L${f1(+x + 5)} ${y}L${x} ${f1(+y + 5)}L${f1(x - 5)} ${y}Z" fill="#555" data-t="${c.t}"><title>${esc(tip.join(', '))}</title></path>`);
      if (fin(c.available_bps)) {
        tc.s.push(`<line class="avail-mark" x1="${f1(x - 5)}" x2="${f1(+x + 5)}" y1="${f1(tc.y(c.available_bps / div))}" y2="${f1(tc.y(c.available_bps / div))}" stroke="#555" stroke-width="2"/>`);
      }
    }
    tc.s.push('</g>');
    if (!tput.length && !caps.length) nodata(tc, 'no throughput tests in this range');
    failureMarks(tc, fails.filter(isTput), from, to);
    eventLines(tc, events, from, to);
    out.push(`<h3>Throughput</h3><div class="chart-box">${closeChart(tc)}</div>`);
    out.push('<div class="legend"><span class="item"><span style="color:#1f77b4">●</span> test (hover: streams, window)</span>' +
      '<span class="item"><span style="color:#e67e22">●</span> test with a warning</span><span class="item"><span class="x-sw">✕</span> failed or refused test</span>' +
      (caps.length ? '<span class="item"><span style="color:#555">◆</span> capacity (— available bandwidth)</span>' : '') +
      '<span class="item"><span class="dash-sw"></span>event</span></div>');

    // (c) one-way delays
    const owd = lat.filter((s) => fin(s.owd_fwd) || fin(s.owd_rev));
    const clocks = d.clocks || {};
    const unsynced = [clocks.src, clocks.dst].some((c) => c && c.synced === false);
    const clock = fin(d.clock_error_ms) ? `clock error ± ${+d.clock_error_ms.toPrecision(2)} ms`
      : unsynced ? 'a clock is not synchronized: clock error unknown' : 'clock error unknown';
    if (owd.length) {
      const vals = owd.flatMap((s) => [s.owd_fwd, s.owd_rev]).filter(fin);
      const olo = Math.min(...vals), ohi = Math.max(...vals), opad = (ohi - olo) * 0.1 || 0.5;
      const oc = chart('owd', w, 200, from, to, niceTicks(olo - opad, ohi + opad, 4), 'one-way delay (ms)');
      oc.s[0] = oc.s[0].replace('class="chart"', 'class="chart draggable"');
      oc.s.push(`<g clip-path="url(#clip-owd)"><path class="owd-fwd" d="${linePath(oc, lat.map((s) => [s.t, s.owd_fwd]))}"/>` +
        `<path class="owd-rev" d="${linePath(oc, lat.map((s) => [s.t, s.owd_rev]))}"/></g>`);
      eventLines(oc, events, from, to);
      out.push(`<h3>One-way delay <span id="clock-error" class="muted" data-ms="${esc(d.clock_error_ms)}">(${esc(clock)})</span></h3><div class="chart-box">${closeChart(oc)}</div>`);
      out.push(`<div class="legend"><span class="item"><span class="line-sw" style="border-color:#1f77b4"></span>forward median (${esc(src)} → ${esc(dst)})</span>` +
        `<span class="item"><span class="line-sw" style="border-color:#e6550d"></span>reverse median (${esc(dst)} → ${esc(src)})</span>` +
        `<span class="item">${esc(clock)}: one-way delays are only as good as the two hosts' clocks</span></div>`);
    } else {
      out.push(`<h3>One-way delay</h3><p class="muted" id="owd-none">No one-way delay measurements in this range (${esc(clock)}).</p>`);
    }

    // (d) the route: the latest trace, hop by hop (route changes are events below)
    const rt = d.route && d.route.trace;
    if (rt && Array.isArray(rt.hops)) {
      const rows = rt.hops.map((h) => {
        const addrs = Array.isArray(h.addrs) && h.addrs.length ? h.addrs.map(esc).join('<br>') : '*';
        return `<tr><td class="t">${esc(h.ttl)}</td><td>${addrs}</td><td class="t">${esc(fmtMs(h.rtt_ms))}</td>` +
          `<td class="t">${esc(fmtLoss(h.loss_pct / 100))}</td><td class="t">${esc(fmtLoss(h.path_loss_pct / 100))}</td>` +
          `<td>${esc(h.note ?? '')}</td></tr>`;
      });
      const w = rt.one_way;
      const note = `trace at ${fmtTime(d.route.t)}, ${rt.rounds} rounds` + (rt.reached ? '' : ', the destination did not answer') +
        (fin(rt.path_mtu) ? `, path MTU ${rt.path_mtu} B` : '') +
        (w && fin(w.forward_loss_pct) ? `, to the destination ${fmtLoss(w.forward_loss_pct / 100)} lost on the way there and ` +
          `${fmtLoss(w.reverse_loss_pct / 100)} on the way back (${w.arrived} of ${w.sent} probes arrived)` : '');
      out.push(`<h3>Route <span class="muted">(${esc(note)})</span></h3><table id="route" class="events"><thead><tr><th>Hop</th>` +
        `<th>Address</th><th>RTT median</th><th>Loss</th><th>Path loss</th><th>Note</th></tr></thead><tbody>${rows.join('')}</tbody></table>` +
        '<p class="muted">Path loss is what the path loses up to that hop; the rest of a hop\'s loss is the router not answering (rate limiting).</p>');
    } else {
      out.push('<h3>Route</h3><p class="muted" id="route-none">No trace of this path yet.</p>');
    }

    // (e) events
    out.push(`<h3>Events on this path</h3>${eventsTable(events.slice().sort(byT).reverse(), 'pair-events')}`);
    view.innerHTML = out.join('');
  }

  // ---------- zoom ----------
  function zoomTo(from, to, live) {
    const r = parseHash();
    if (r.view !== 'pair') return;
    state.zoomStack.push(location.hash);
    if (state.zoomStack.length > 50) state.zoomStack.shift();
    from = Math.floor(from); to = Math.ceil(to);
    const next = pairHash(r.src, r.dst, `from=${from}&to=${to}${live ? '&live=1' : ''}`);
    if (next === location.hash) { state.zoomStack.pop(); route(); } else location.hash = next;
  }
  function svgX(svg, e) {
    const b = svg.getBoundingClientRect();
    return ((e.clientX - b.left) * svg.viewBox.baseVal.width) / (b.width || 1);
  }

  view.addEventListener('click', (e) => {
    const cell = e.target.closest('td[data-src]');
    if (cell) { location.hash = pairHash(cell.dataset.src, cell.dataset.dst); return; }
    const btn = e.target.closest('button');
    if (!btn || btn.disabled) return;
    const r = parseHash();
    if (btn.dataset.span) {
      const now = Math.round(serverNow());
      zoomTo(now - +btn.dataset.span, now, true);
    } else if (btn.id === 'zoom-back' && state.zoomStack.length) {
      location.hash = state.zoomStack.pop();
    } else if (btn.id === 'zoom-reset' && r.view === 'pair') {
      state.zoomStack.push(location.hash);
      location.hash = pairHash(r.src, r.dst);
    }
  });
  view.addEventListener('mouseover', (e) => {
    const cell = e.target.closest('td[data-src]');
    const info = $('#hover-info');
    if (cell && info) info.textContent = cell.title.replace(/\n/g, ' · ');
  });
  view.addEventListener('mousedown', (e) => {
    const svg = e.target.closest('svg.chart.draggable');
    if (!svg || e.button !== 0) return;
    const ml = +svg.dataset.ml, pw = +svg.dataset.pw, x0 = svgX(svg, e);
    if (x0 < ml || x0 > ml + pw) return;
    e.preventDefault();
    const sel = svg.querySelector('.sel');
    state.dragging = { svg, sel, ml, pw, x0, x1: x0, from: +svg.dataset.from, to: +svg.dataset.to };
    sel.setAttribute('x', x0); sel.setAttribute('width', 0); sel.setAttribute('visibility', 'visible');
  });
  window.addEventListener('mousemove', (e) => {
    const d = state.dragging;
    if (!d) return;
    d.x1 = Math.min(d.ml + d.pw, Math.max(d.ml, svgX(d.svg, e)));
    d.sel.setAttribute('x', f1(Math.min(d.x0, d.x1)));
    d.sel.setAttribute('width', f1(Math.abs(d.x1 - d.x0)));
  });
  window.addEventListener('mouseup', () => {
    const d = state.dragging;
    if (!d) return;
    state.dragging = null;
    d.sel.setAttribute('visibility', 'hidden');
    if (Math.abs(d.x1 - d.x0) < 4) return;
    const tAt = (px) => d.from + ((px - d.ml) / d.pw) * (d.to - d.from);
    let t0 = tAt(Math.min(d.x0, d.x1)), t1 = tAt(Math.max(d.x0, d.x1));
    if (t1 - t0 < 300) { const mid = (t0 + t1) / 2; t0 = mid - 150; t1 = mid + 150; }
    zoomTo(t0, t1, false);
  });
  window.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && state.dragging) { state.dragging.sel.setAttribute('visibility', 'hidden'); state.dragging = null; }
  });
  let resizeTimer = null;
  window.addEventListener('resize', () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => {
      if (state.lastPair && state.key.startsWith('pair\n') && parseHash().view === 'pair') renderPair(state.lastPair.d, state.lastPair.r);
    }, 250);
  });
  window.addEventListener('hashchange', route);
  window.addEventListener('error', (e) => setStatus(`Script error: ${e.message}`, 'error'));
  window.addEventListener('unhandledrejection', (e) => setStatus(`Error: ${e.reason && e.reason.message ? e.reason.message : e.reason}`, 'error'));
  route();
})();
