// trainbot run pages: charts drawn with uPlot from /api/runs/ID/points
// (min/max per pixel), zoom by drag or pinch with a reset, live updates
// over Server-Sent Events. No build step, no CDN.
(function () {
  'use strict';
  var $ = function (s) { return document.querySelector(s); };
  var cfgEl = $('#page');
  var page = cfgEl ? JSON.parse(cfgEl.textContent) : null;
  var palette = ['#2563eb', '#dc2626', '#16a34a', '#d97706', '#7c3aed', '#0891b2', '#db2777', '#65a30d'];
  var tb = window.trainbot = { charts: {}, loadedAt: Date.now() + Math.random(), events: 0 };

  // TensorBoard's smoothing: an exponential moving average, debiased at
  // the start; gaps (null) are skipped.
  function ema(ys, w) {
    var out = new Array(ys.length), last = 0, n = 0;
    for (var i = 0; i < ys.length; i++) {
      var y = ys[i];
      if (y == null || !isFinite(y)) { out[i] = null; continue; }
      last = last * w + (1 - w) * y; n++;
      out[i] = w > 0 ? last / (1 - Math.pow(w, n)) : y;
    }
    return out;
  }

  function getJSON(url) {
    return fetch(url, { cache: 'no-store' }).then(function (r) {
      if (!r.ok) throw new Error(url.split('?')[0] + ': ' + r.status);
      return r.json();
    });
  }

  function q(params) {
    var s = [];
    for (var k in params) if (params[k] != null) s.push(encodeURIComponent(k) + '=' + encodeURIComponent(params[k]));
    return s.join('&');
  }

  function fmtBytes(v) {
    if (v == null) return '';
    var u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'], i = 0;
    while (Math.abs(v) >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    return (Math.round(v * 10) / 10) + ' ' + u[i];
  }

  // isBytes is internal/units.IsBytes: a metric whose name says memory
  // (and no other unit) and whose value is at least 1 MiB is a byte count.
  var bytesWords = {mem: 1, memory: 1, vram: 1, bytes: 1, rss: 1, hwm: 1};
  var otherUnits = {kb: 1, kib: 1, mb: 1, mib: 1, gb: 1, gib: 1, tb: 1, pct: 1, percent: 1, util: 1,
    utilization: 1, frac: 1, fraction: 1, ratio: 1, share: 1};
  function isBytes(name, v) {
    if (!isFinite(v) || Math.abs(v) < 1048576) return false;
    var words = String(name).toLowerCase().split(/[^a-z0-9]+/), found = false;
    for (var i = 0; i < words.length; i++) {
      if (otherUnits[words[i]]) return false;
      if (bytesWords[words[i]]) found = true;
    }
    return found;
  }
  // fmtMetric prints a metric's value as the chat does: a byte count as
  // internal/units.Bytes ("240.04 MiB"), else 5 significant digits.
  function fmtMetric(name, v) {
    if (!isBytes(name, v)) return String(Number(v.toPrecision(5)));
    var u = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB'], i = -1, a = Math.abs(v);
    while (a >= 1024 && i < u.length - 1) { a /= 1024; i++; }
    return (v < 0 ? '-' : '') + a.toFixed(2) + ' ' + u[i];
  }

  tb.fmtMetric = fmtMetric;

  // Chart: one uPlot in a div. opts.load(from, to, width) resolves to
  // {from, to, series: [{label, x: [], y: []}]}; from/to null mean all.
  function Chart(id, opts) {
    this.el = document.getElementById(id);
    this.opts = opts;
    this.view = null;      // [min, max] when zoomed, else null
    this.busy = false;
    this.u = null;
    this.labels = '';
    this.smooth = opts.smooth ? Number(($('#smooth') || {}).value || 0) : 0;
    this.raw = null;
    tb.charts[id] = this;
    this.el.dataset.points = '0';
  }

  Chart.prototype.width = function () { return Math.max(200, this.el.clientWidth || 300); };

  Chart.prototype.load = function () {
    var c = this;
    if (c.busy) { c.again = true; return Promise.resolve(); }
    c.busy = true;
    var scale = c.opts.time ? 1000 : 1;
    var from = c.view ? Math.floor(c.view[0] * scale) : null;
    var to = c.view ? Math.ceil(c.view[1] * scale) : null;
    return c.opts.load(from, to, c.width()).then(function (d) {
      c.raw = d;
      c.draw();
    }).catch(function (e) {
      c.el.dataset.error = String(e);
    }).then(function () {
      c.busy = false;
      if (c.again) { c.again = false; c.load(); }
    });
  };

  // draw turns the series into uPlot's aligned columns (and smoothed
  // copies) and sets them, keeping the zoom.
  Chart.prototype.draw = function () {
    var c = this, d = c.raw, scale = c.opts.time ? 1000 : 1;
    var tables = [], series = [{ label: c.opts.time ? '时间 Time' : '步 Step' }], n = 0;
    d.series.forEach(function (s, i) {
      var xs = s.x.map(function (x) { return x / scale; });
      n += xs.length;
      var color = palette[i % palette.length];
      tables.push([xs, s.y]);
      series.push({ label: s.label, stroke: c.smooth > 0 ? color + '55' : color, width: 1, spanGaps: true,
        value: c.opts.fmt ? function (u, v) { return c.opts.fmt(v); } : undefined });
      if (c.smooth > 0) {
        tables.push([xs, ema(s.y, c.smooth)]);
        series.push({ label: s.label + ' ~', stroke: color, width: 2, spanGaps: true,
          value: c.opts.fmt ? function (u, v) { return c.opts.fmt(v); } : undefined });
      }
    });
    c.el.dataset.points = String(n);
    if (tables.length === 0) {
      c.el.classList.add('nodata');
      c.el.textContent = '无数据 No data';
      if (c.u) { c.u.destroy(); c.u = null; c.labels = ''; }
      return;
    }
    c.el.classList.remove('nodata');
    var data = uPlot.join(tables);
    var labels = series.map(function (s) { return s.label; }).join('\n');
    if (!c.u || labels !== c.labels) {
      if (c.u) c.u.destroy();
      c.el.textContent = '';
      c.labels = labels;
      c.u = new uPlot(c.options(series), data, c.el);
      c.attachPinch();
    } else {
      c.u.setData(data, !c.view);
    }
    // The x range: the zoom, else the whole range the server reported
    // (the first and last stored steps, which a column's min and max may
    // not include).
    var r = c.view || (d.from != null && d.to != null && d.to > d.from ? [d.from / scale, d.to / scale] : null);
    if (r) c.u.setScale('x', { min: r[0], max: r[1] });
    c.mark();
  };

  // mark writes the x range shown on the element (read by the tests).
  Chart.prototype.mark = function () {
    var x = this.u && this.u.scales.x;
    if (x && x.min != null) { this.el.dataset.xmin = String(x.min); this.el.dataset.xmax = String(x.max); }
  };

  Chart.prototype.options = function (series) {
    var c = this;
    return {
      width: c.width(), height: 220, series: series,
      scales: { x: { time: !!c.opts.time } },
      axes: [{}, { size: 60, values: c.opts.fmt ? function (u, vs) { return vs.map(c.opts.fmt); } : undefined }],
      // A drag selects; the selection becomes the zoom here (not by
      // uPlot), so that only the user's drags and pinches zoom, never a
      // redraw with new data.
      cursor: { drag: { x: true, y: false, setScale: false } },
      legend: { live: true },
      hooks: {
        draw: [function (u) { c.drawMarkers(u); }],
        setScale: [function (u, key) { if (key === 'x') c.mark(); }],
        setSelect: [function (u) {
          var s = u.select;
          if (s.width < 2) return;
          var min = u.posToVal(s.left, 'x'), max = u.posToVal(s.left + s.width, 'x');
          u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
          c.zoomTo(min, max);
        }]
      }
    };
  };

  // drawMarkers draws the run's live changes (调参) as dashed vertical
  // lines with their label, as the PNG charts do.
  Chart.prototype.drawMarkers = function (u) {
    var ms = this.opts.markers || [], ctx = u.ctx, b = u.bbox, dpr = window.devicePixelRatio || 1;
    if (!ms.length) return;
    ctx.save();
    ctx.strokeStyle = '#7b2fbe'; ctx.fillStyle = '#7b2fbe'; ctx.lineWidth = dpr;
    ctx.setLineDash([4 * dpr, 3 * dpr]);
    ctx.font = (11 * dpr) + 'px system-ui, sans-serif';
    ms.forEach(function (m, i) {
      var x = u.valToPos(m.step, 'x', true);
      if (x < b.left || x > b.left + b.width) return;
      ctx.beginPath(); ctx.moveTo(x, b.top); ctx.lineTo(x, b.top + b.height); ctx.stroke();
      ctx.fillText(m.label, x + 3 * dpr, b.top + (12 + 12 * (i % 3)) * dpr);
    });
    ctx.restore();
    this.el.dataset.markers = String(ms.length);
  };

  // zoomTo asks for the points of [min, max] at full resolution, once the
  // user stops for a moment.
  Chart.prototype.zoomTo = function (min, max) {
    var c = this;
    c.view = [min, max];
    c.u.setScale('x', { min: min, max: max });
    clearTimeout(c.timer);
    c.timer = setTimeout(function () { c.load(); }, 150);
  };

  Chart.prototype.reset = function () { clearTimeout(this.timer); this.view = null; return this.load(); };

  Chart.prototype.setSmooth = function (w) { this.smooth = w; if (this.raw) this.draw(); };

  Chart.prototype.resize = function () { if (this.u) this.u.setSize({ width: this.width(), height: 220 }); };

  // Two fingers on the plot zoom the x axis around their middle; one
  // finger still scrolls the page.
  Chart.prototype.attachPinch = function () {
    var c = this, over = c.u.over, start = null;
    function dist(t) { return Math.abs(t[0].clientX - t[1].clientX) || 1; }
    over.addEventListener('touchstart', function (e) {
      if (e.touches.length !== 2) { start = null; return; }
      var r = over.getBoundingClientRect(), x = c.u.scales.x;
      start = { d: dist(e.touches), cx: (e.touches[0].clientX + e.touches[1].clientX) / 2 - r.left, w: r.width, min: x.min, max: x.max };
      e.preventDefault();
    }, { passive: false });
    over.addEventListener('touchmove', function (e) {
      if (!start || e.touches.length !== 2) return;
      e.preventDefault();
      var k = start.d / dist(e.touches), span = start.max - start.min;
      var at = start.min + span * (start.cx / start.w);
      c.zoomTo(at - (at - start.min) * k, at + (start.max - at) * k);
    }, { passive: false });
    over.addEventListener('touchend', function () { start = null; });
  };

  function pointsOf(run, metric, tok) {
    return function (from, to, width) {
      return getJSON('/api/runs/' + run + '/points?' + q({ metric: metric, from: from, to: to, width: width, t: tok }));
    };
  }

  // metricsChart loads several metrics (or runs) into one chart.
  function metricsLoader(list) {
    return function (from, to, width) {
      var lo = null, hi = null;
      return Promise.all(list().map(function (s) {
        return s.get(from, to, width).then(function (d) {
          if (d.x && d.x.length) {
            lo = lo == null ? d.from : Math.min(lo, d.from);
            hi = hi == null ? d.to : Math.max(hi, d.to);
          }
          return { label: s.label, x: d.x || [], y: d.y || [] };
        });
      })).then(function (series) { return { series: series, from: lo, to: hi }; });
    };
  }

  function samplesLoader(run, tok, pick) {
    return function (from, to, width) {
      return getJSON('/api/runs/' + run + '/samples?' + q({ from: from, to: to, width: width, t: tok })).then(function (d) {
        return { series: pick(d), from: d.from, to: d.to };
      });
    };
  }

  function bindCommon() {
    document.querySelectorAll('button.reset').forEach(function (b) {
      b.addEventListener('click', function () { var c = tb.charts[b.dataset.chart]; if (c) c.reset(); });
    });
    var sm = $('#smooth');
    if (sm) sm.addEventListener('input', function () {
      var w = Number(sm.value);
      $('#smooth-v').textContent = w.toFixed(2);
      for (var k in tb.charts) if (tb.charts[k].opts.smooth) tb.charts[k].setSmooth(w);
    });
    var t;
    window.addEventListener('resize', function () {
      clearTimeout(t);
      t = setTimeout(function () { for (var k in tb.charts) tb.charts[k].resize(); }, 100);
    });
  }

  function runPage() {
    var id = page.id, tok = page.token;
    var losses = page.losses && page.losses.length ? page.losses : (page.metrics || []).slice(0, 1);
    var loss = new Chart('chart-loss', { smooth: true, live: true, markers: page.changes || [], load: metricsLoader(function () {
      return losses.map(function (m) { return { label: m, get: pointsOf(id, m, tok) }; });
    }) });
    var sel = $('#metric');
    var metric = new Chart('chart-metric', { live: true, load: metricsLoader(function () {
      return sel.value ? [{ label: sel.value, get: pointsOf(id, sel.value, tok) }] : [];
    }) });
    sel.addEventListener('change', function () { metric.reset(); });
    var mem = new Chart('chart-memory', { time: true, live: true, fmt: fmtBytes, load: samplesLoader(id, tok, function (d) {
      return [{ label: 'GPU', x: d.gpu.x || [], y: d.gpu.y || [] }, { label: '主机 Host', x: d.host.x || [], y: d.host.y || [] }]
        .filter(function (s) { return s.x.length > 0; });
    }) });
    var util = new Chart('chart-util', { time: true, live: true, fmt: function (v) { return v == null ? '' : Math.round(v) + '%'; },
      load: samplesLoader(id, tok, function (d) {
        return (d.util || []).map(function (u) { return { label: 'GPU ' + u.device, x: u.x || [], y: u.y || [] }; });
      }) });
    bindCommon();
    [loss, metric, mem, util].forEach(function (c) { c.load(); });
    if (!page.running) return;
    var es = new EventSource('/api/runs/' + id + '/events?' + q({ t: tok }));
    es.onmessage = function (m) {
      var ev = JSON.parse(m.data);
      tb.events++;
      $('#step').textContent = ev.step;
      var st = $('#state');
      st.textContent = ev.state; st.className = 'state s-' + ev.state;
      if (ev.total && $('#total')) $('#total').textContent = ev.total;
      $('#rate').textContent = ev.steps_per_sec ? '· ' + ev.steps_per_sec.toFixed(1) + ' 步/秒 steps/s' : '';
      if (ev.last) $('#last').textContent = Object.keys(ev.last).map(function (k) { return k + ' ' + fmtMetric(k, ev.last[k]); }).join(' · ');
      if (ev.log) { var pre = $('#log'); pre.textContent = ev.log.join('\n'); }
      for (var k in tb.charts) { var c = tb.charts[k]; if (c.opts.live && !c.view) c.load(); }
      if (!ev.running) es.close();
    };
  }

  function comparePage() {
    var tok = page.token, runs = page.runs || [], sel = $('#metric');
    (page.metrics || []).forEach(function (m) { var o = document.createElement('option'); o.textContent = m; sel.appendChild(o); });
    var c = new Chart('chart-compare', { smooth: true, load: metricsLoader(function () {
      return runs.filter(function (r) { return (r.metrics || []).indexOf(sel.value) >= 0; })
        .map(function (r) { return { label: '#' + r.id + ' ' + r.job, get: pointsOf(r.id, sel.value, tok) }; });
    }) });
    sel.addEventListener('change', function () { c.reset(); });
    bindCommon();
    c.load();
  }

  function listPage() {
    var a = $('#compare');
    if (!a) return;
    a.addEventListener('click', function (e) {
      e.preventDefault();
      var ids = [];
      document.querySelectorAll('.pick input:checked').forEach(function (i) { ids.push(i.value); });
      if (ids.length < 2) { a.textContent = '请选两个以上 · Pick two or more'; return; }
      location.href = '/compare?' + q({ runs: ids.join(','), t: a.dataset.token });
    });
  }

  if ($('#chart-loss')) runPage();
  else if ($('#chart-compare')) comparePage();
  else listPage();
})();
