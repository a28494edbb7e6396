"""The report's inline stylesheet and script (no external resources; the CSP forbids them anyway)."""

CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

CSS = """
:root{--fg:#1d232b;--muted:#5f6670;--line:#dde2e8;--bg:#f6f7f9;--card:#fff;--accent:#0b5fa5;
--holds:#1e7b45;--holds-bg:#e3f4ea;--violated:#b3261e;--violated-bg:#fbe6e4;--inconclusive:#8a5a00;
--inconclusive-bg:#fdf1d6;--infeasible:#4b5563;--infeasible-bg:#eceef1}
*{box-sizing:border-box}
html{font-size:15px}
body{margin:0;background:var(--bg);color:var(--fg);line-height:1.5;
font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif}
a{color:var(--accent);text-decoration:none}a:hover{text-decoration:underline}
header.top{background:#1f2a37;color:#e9edf2;padding:.7rem 1.5rem;display:flex;gap:1rem;align-items:baseline;
flex-wrap:wrap}
header.top a{color:#cfe3ff}header.top .brand{font-weight:700;letter-spacing:.02em;color:#fff}
header.top .sub{color:#b8c2cf;font-size:.9rem}
main{max-width:1280px;margin:0 auto;padding:1.2rem 1.5rem 3rem}
h1{font-size:1.55rem;margin:.3rem 0 .2rem;line-height:1.3}
h1 .label{color:var(--muted);font-weight:600;margin-right:.4rem}
h2{font-size:1.15rem;margin:1.8rem 0 .6rem;padding-bottom:.25rem;border-bottom:1px solid var(--line)}
h3{font-size:1rem;margin:1.2rem 0 .4rem}
.meta{color:var(--muted);font-size:.9rem;margin:.1rem 0 .8rem}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:.9rem 1.1rem;margin:.8rem 0}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(220px,1fr));gap:.35rem 1.5rem}
.kv{display:flex;gap:.5rem;font-size:.92rem}.kv b{font-weight:600;color:var(--muted);min-width:7.5rem}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.3rem 1.2rem;margin:0;font-size:.93rem}
dl.facts dt{color:var(--muted);font-weight:600}dl.facts dd{margin:0}
.badge{display:inline-block;padding:.05rem .55rem;border-radius:999px;font-weight:650;font-size:.84rem;
border:1px solid transparent;white-space:nowrap}
.v-holds{color:var(--holds);background:var(--holds-bg);border-color:#b7e1c6}
.v-violated{color:var(--violated);background:var(--violated-bg);border-color:#f1b9b3}
.v-inconclusive,.v-na{color:var(--inconclusive);background:var(--inconclusive-bg);border-color:#f0d79a}
.v-infeasible,.v-error{color:var(--infeasible);background:var(--infeasible-bg);border-color:#d4d8de}
.v-error{color:#7a1d16}
.badge.big{font-size:1.05rem;padding:.15rem .8rem}
.flag{display:inline-block;font-size:.74rem;padding:0 .4rem;margin:.1rem 0 .1rem .25rem;border-radius:4px;
border:1px solid #c9ced6;color:#414a55;background:#fff;white-space:nowrap}
.flag.warn{border-color:#e0b252;color:#7a5200;background:#fff8e6}
.flag.bad{border-color:#e9a29b;color:#9b2119;background:#fff3f1}
.flag.good{border-color:#9fd3b3;color:#1e6b3d;background:#f1fbf5}
table{border-collapse:collapse;width:100%;background:var(--card);font-size:.9rem}
th,td{padding:.35rem .55rem;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
thead th{background:#eef1f5;font-weight:650;font-size:.84rem;color:#39424e;white-space:nowrap}
table.sortable thead th{cursor:pointer;user-select:none}
table.sortable thead th:hover{background:#e2e7ee}
table.sortable thead th::after{content:" \\2195";color:#a3abb6;font-size:.75rem}
table.sortable thead th[aria-sort=ascending]::after{content:" \\25B2";color:var(--accent)}
table.sortable thead th[aria-sort=descending]::after{content:" \\25BC";color:var(--accent)}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tbody tr:hover{background:#f7f9fc}
tr.unexpected td:first-child{box-shadow:inset 3px 0 0 var(--violated)}
.tablewrap{overflow-x:auto;border:1px solid var(--line);border-radius:8px}
.tablewrap table{border:0}
td.label a{font-weight:600;white-space:nowrap}
td .small,.small{font-size:.8rem;color:var(--muted)}
.controls{display:flex;gap:.8rem;align-items:center;flex-wrap:wrap;margin:1rem 0 .4rem;position:sticky;top:0;
background:var(--bg);padding:.4rem 0;z-index:2}
.controls input[type=search]{flex:1 1 280px;max-width:460px;padding:.4rem .6rem;border:1px solid #c3c9d1;
border-radius:6px;font-size:.95rem}
.controls select{padding:.38rem .4rem;border:1px solid #c3c9d1;border-radius:6px;font-size:.95rem;background:#fff}
.controls label{font-size:.9rem;color:#39424e}
.count{color:var(--muted);font-size:.88rem}
.coverage td.num{width:6.5rem}
.bar{display:flex;height:.7rem;border-radius:3px;overflow:hidden;min-width:140px;background:#eef0f3}
.bar span{display:block;height:100%}
.b-holds{background:#2f9e5e}.b-violated{background:#d0453b}.b-inconclusive{background:#e3a72f}
.b-infeasible{background:#a4abb5}.b-error{background:#6b2a25}
.findings{border-left:4px solid var(--violated);background:#fff}
.findings h2{border:0;margin-top:.2rem;color:var(--violated)}
.findings li{margin:.45rem 0}
.changes{border-left:4px solid var(--accent)}
.changes h2{border:0;margin-top:.2rem}
.statement{font-size:1.2rem;line-height:2.1;overflow-x:auto;padding:.6rem .2rem}
math{font-family:"Latin Modern Math","STIX Two Math","Cambria Math","Libertinus Math","TeX Gyre Termes Math",math}
math[display=block]{margin:.4rem 0;overflow-x:auto;overflow-y:hidden}
.formula math,.requires math{math-style:normal;font-size:1.12em}
/* nested fractions in bounds and regimes keep their size; a radical's bar clears its argument */
.formula mfrac>*,.requires mfrac>*{math-style:normal}
msqrt>*,mroot>:first-child{padding-top:.14em}
.tail-q{pointer-events:all}
.requires{margin:.1rem 0 .3rem;padding-left:1.2rem}.requires li{margin:.25rem 0}
.mbf{font-weight:bold}.mbi{font-weight:bold;font-style:italic}.msf{font-family:sans-serif}
.mtt{font-family:monospace}.mit{font-style:italic}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace;font-size:.86rem}
code.latex-src{white-space:pre-wrap;background:#f3f4f6;padding:.2rem .35rem;border-radius:4px;display:inline-block}
pre{background:#1f2a37;color:#e9edf2;padding:.7rem .9rem;border-radius:6px;overflow-x:auto;white-space:pre-wrap;
overflow-wrap:anywhere}
details summary{cursor:pointer;color:var(--muted);font-size:.88rem}
.prose p{margin:.45rem 0;max-width:60rem}
.figure{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:.6rem .8rem .8rem;
margin:.8rem 0}
.figure svg.plot{width:100%;max-width:860px;height:auto;display:block}
.figure .caption{font-size:.86rem;color:var(--muted);max-width:60rem;margin:.3rem 0 0}
ul.legend{list-style:none;padding:0;margin:.3rem 0;display:flex;flex-wrap:wrap;gap:.25rem 1.2rem;font-size:.85rem}
ul.legend li{display:flex;align-items:center;gap:.35rem}
svg.sw{flex:none}
svg text{fill:#39424e}svg text.axis-label{font-weight:600;fill:#1d232b}
.sweep{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:0 1rem;align-items:start}
.sweep.single{grid-template-columns:repeat(auto-fill,minmax(520px,1fr))}
.plots{display:grid;grid-template-columns:repeat(auto-fit,minmax(460px,1fr));gap:0 1rem}
.note{color:var(--muted);font-size:.9rem}
.warnbox{border-left:4px solid #e3a72f;background:#fffaf0}
.errbox{border-left:4px solid var(--violated);background:#fff6f5}
footer{color:var(--muted);font-size:.84rem;max-width:1280px;margin:0 auto;padding:0 1.5rem 2rem}
.legendtext dt{font-weight:650}.legendtext dd{margin:0 0 .4rem 0}
[hidden]{display:none!important}
.graphwrap{overflow:auto;background:var(--card);border:1px solid var(--line);border-radius:8px;padding:.4rem;
max-height:80vh}
svg.graph{display:block}svg.graph text{font-size:12px;fill:#1d232b;pointer-events:none}
svg.graph .edge{fill:none;stroke:#aab2bd;stroke-width:1.2}svg.graph .edge.stmt{stroke-dasharray:5 3}
svg.graph .node rect{stroke:#7b8794;stroke-width:1}svg.graph .node.main text{font-weight:700}
.vn-violated{fill:#f6c9c4}.vn-error{fill:#e3b3ad}.vn-inconclusive{fill:#f8e2a8}.vn-holds{fill:#c6ebd3}
.vn-infeasible{fill:#dde1e6}.vn-notrun{fill:#f4f5f7}.graph-legend rect{stroke:#7b8794}
svg.graph .node.named rect,.named-sw{stroke:#7a1d16;stroke-width:3}.named-sw{fill:#fff}
svg.graph .node.inreach rect{stroke:#0b5fa5;stroke-width:3.5}svg.graph .node.own rect{stroke:#b3261e;stroke-width:4}
svg.graph .edge.inreach{stroke:#0b5fa5;stroke-width:2.4}svg.graph.dim .node:not(.inreach):not(.own){opacity:.35}
.finding-reach.active{border-color:#0b5fa5;box-shadow:0 0 0 2px #cfe3ff}
@media print{.controls,header.top{display:none}body{background:#fff}}
"""

JS = r"""
(function(){
  function val(td, type){
    var v = td.getAttribute('data-v');
    if (v === null) v = td.textContent.trim();
    if (type === 'num'){ var x = parseFloat(v); return isNaN(x) ? null : x; }
    return v.toLowerCase();
  }
  function sortTable(table, col, th){
    var type = th.getAttribute('data-type') || 'text';
    var dir = th.getAttribute('aria-sort') === 'ascending' ? -1 : 1;
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function(c){ c.removeAttribute('aria-sort'); });
    th.setAttribute('aria-sort', dir === 1 ? 'ascending' : 'descending');
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows).map(function(r, i){
      return {r: r, i: i, k: val(r.cells[col], type)};
    });
    rows.sort(function(a, b){
      if (a.k === null && b.k === null) return a.i - b.i;
      if (a.k === null) return 1;          /* missing values last, whatever the direction */
      if (b.k === null) return -1;
      var c = type === 'num' ? (a.k - b.k) : a.k.localeCompare(b.k, undefined, {numeric: true});
      return c ? dir * c : a.i - b.i;
    });
    rows.forEach(function(x){ body.appendChild(x.r); });
  }
  Array.prototype.forEach.call(document.querySelectorAll('table.sortable'), function(table){
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function(th, col){
      th.tabIndex = 0;
      th.title = th.title || 'sort by this column';
      th.addEventListener('click', function(){ sortTable(table, col, th); });
      th.addEventListener('keydown', function(e){
        if (e.key === 'Enter' || e.key === ' '){ e.preventDefault(); sortTable(table, col, th); }
      });
    });
  });
  var gf = document.getElementById('graph-finding');
  if (gf){
    /* the proof-graph page: mark the chosen finding's own results and its reach, and the edges inside it */
    var svgEl = document.querySelector('svg.graph'), gcount = document.getElementById('graph-count');
    var highlight = function(){
      var opt = gf.options[gf.selectedIndex], reach = {}, own = {}, n = 0;
      (opt.getAttribute('data-reach') || '').split(' ').filter(Boolean).forEach(function(i){ reach[i] = 1; });
      (opt.getAttribute('data-own') || '').split(' ').filter(Boolean).forEach(function(i){ own[i] = 1; });
      Array.prototype.forEach.call(svgEl.querySelectorAll('.node'), function(g){
        var i = g.getAttribute('data-node');
        g.classList.toggle('inreach', !!reach[i]); g.classList.toggle('own', !!own[i]); if (reach[i]) n++;
      });
      Array.prototype.forEach.call(svgEl.querySelectorAll('.edge'), function(e){
        var a = e.getAttribute('data-from'), b = e.getAttribute('data-to');
        e.classList.toggle('inreach', !!(reach[a] && (reach[b] || own[b])));
      });
      svgEl.classList.toggle('dim', !!gf.value);
      Array.prototype.forEach.call(document.querySelectorAll('.finding-reach'), function(s){
        s.classList.toggle('active', s.id === 'finding-' + gf.value);
      });
      gcount.textContent = gf.value ? n + ' result(s) rest on it' : '';
    };
    gf.addEventListener('change', highlight); highlight();
  }
  var q = document.getElementById('filter-text'), vf = document.getElementById('filter-verdict'),
      uf = document.getElementById('filter-unexpected'), count = document.getElementById('filter-count');
  if (!q) return;
  var rows = Array.prototype.slice.call(document.querySelectorAll('table.claims tbody tr'));
  rows.forEach(function(r){ r._text = r.textContent.toLowerCase(); });
  function apply(){
    var terms = q.value.toLowerCase().split(/\s+/).filter(Boolean), v = vf.value, u = uf.checked, shown = 0;
    rows.forEach(function(r){
      var ok = terms.every(function(t){ return r._text.indexOf(t) >= 0; }) &&
               (!v || r.getAttribute('data-verdict') === v) &&
               (!u || r.classList.contains('unexpected') || r.classList.contains('changed'));
      r.hidden = !ok; if (ok) shown++;
    });
    Array.prototype.forEach.call(document.querySelectorAll('section.paper'), function(s){
      s.hidden = !s.querySelector('tbody tr:not([hidden])');
    });
    count.textContent = shown + ' of ' + rows.length + ' claims shown';
  }
  q.addEventListener('input', apply); vf.addEventListener('change', apply); uf.addEventListener('change', apply);
  if (location.hash.indexOf('#q=') === 0){ q.value = decodeURIComponent(location.hash.slice(3)); }
  apply();
})();
"""
