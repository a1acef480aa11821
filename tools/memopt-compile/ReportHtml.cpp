//===- ReportHtml.cpp - the memory report as one HTML page ----------------===//
//
// OUT/memory_report.html, in the spirit of PyTorch's memory_viz: one
// self-contained page (no network: the data, the script and the style are
// inline) with the live scratch bytes over program points stacked by pool,
// the peak, the arena and its lower bound, the arena layout of every buffer,
// and the buffers live at the peak. The data is embedded as JSON in a
// `<script type="application/json">` element; every `<` in it is escaped as
// `\u003c` so no string can close the element, and the script inserts text
// with `textContent` only.
//
//===----------------------------------------------------------------------===//

#include "Report.h"

#include "memopt/Analysis/MemoryAccount.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringExtras.h"

#include <nlohmann/json.hpp>

using namespace memopt;
using Json = nlohmann::ordered_json;

/// The page; @DATA@ is replaced by the JSON.
static const char kTemplate[] = R"html(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>memopt memory report</title>
<style>
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif;
       margin: 24px; color: #222; max-width: 1200px; }
h1 { font-size: 20px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 28px 0 8px; }
.sub { color: #666; margin-bottom: 16px; }
.figures { display: flex; flex-wrap: wrap; gap: 12px; }
.figure { border: 1px solid #ddd; border-radius: 6px; padding: 8px 14px;
          min-width: 150px; }
.figure .label { color: #666; font-size: 12px; }
.figure .value { font-size: 20px; font-weight: 600; }
.figure .exact { color: #888; font-size: 12px; }
table { border-collapse: collapse; }
th, td { padding: 3px 10px; text-align: left; border-bottom: 1px solid #eee; }
th { font-weight: 600; border-bottom: 1px solid #ccc; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.bar { height: 10px; display: inline-block; vertical-align: middle; }
.swatch { width: 10px; height: 10px; display: inline-block; margin-right: 6px;
          vertical-align: middle; }
svg text { font: 11px system-ui, sans-serif; fill: #444; }
.axis line, .axis path { stroke: #999; }
#tooltip { position: fixed; pointer-events: none; background: #fff;
           border: 1px solid #bbb; border-radius: 4px; padding: 4px 8px;
           font-size: 12px; display: none; box-shadow: 0 1px 4px #0002; }
.legend span { margin-right: 16px; }
</style>
</head>
<body>
<h1 id="title">memory report</h1>
<div class="sub" id="subtitle"></div>
<div class="figures">
  <div class="figure"><div class="label">peak live scratch</div>
    <div class="value" id="peak-value"></div>
    <div class="exact"><span id="peak-bytes"></span> B at point
      <span id="peak-index"></span> (<span id="peak-op"></span>
      <span id="peak-scope"></span>)</div></div>
  <div class="figure"><div class="label">scratch arena</div>
    <div class="value" id="arena-value"></div>
    <div class="exact"><span id="arena-bytes"></span> B</div></div>
  <div class="figure"><div class="label">lower bound</div>
    <div class="value" id="lower-bound-value"></div>
    <div class="exact"><span id="lower-bound-bytes"></span> B,
      arena / bound <span id="arena-ratio"></span></div></div>
  <div class="figure"><div class="label">total at the peak</div>
    <div class="value" id="total-value"></div>
    <div class="exact"><span id="total-bytes"></span> B</div></div>
  <div class="figure"><div class="label">compute (forward / backward)</div>
    <div class="value" id="flops-value"></div>
    <div class="exact">recompute <span id="recompute-flops"></span></div></div>
</div>

<h2>Where the memory goes at the peak</h2>
<table id="pools"><thead><tr><th>pool</th><th>bytes</th><th></th>
<th>share</th><th></th></tr></thead><tbody></tbody></table>

<h2>Live scratch bytes over the step</h2>
<div class="legend" id="legend"></div>
<svg id="timeline" width="1150" height="340" role="img"
     aria-label="live scratch bytes per program point"></svg>

<h2>Arena layout (offset over program points)</h2>
<svg id="layout" width="1150" height="300" role="img"
     aria-label="arena offsets of the buffers over program points"></svg>

<div id="host-memory" hidden>
<h2>Host memory (--offload)</h2>
<table id="host"><thead><tr><th>host memory</th><th>bytes</th><th></th>
</tr></thead><tbody></tbody></table>
<h2>Host arena layout (offset over program points)</h2>
<svg id="host-layout" width="1150" height="200" role="img"
     aria-label="host arena offsets of the buffers over program points"></svg>
</div>

<h2>Buffers live at the peak</h2>
<table id="peak-buffers"><thead><tr><th>buffer</th><th>type</th>
<th>bytes</th><th>pool</th><th>scope</th><th>producing op</th>
<th>live</th><th>offset</th></tr></thead><tbody></tbody></table>

<h2>Activations saved for the backward pass, by scope</h2>
<table id="scopes"><thead><tr><th>scope</th><th>bytes</th><th></th>
</tr></thead><tbody></tbody></table>

<div id="tooltip"></div>
<script type="application/json" id="report-data">@DATA@</script>
<script>
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const report = data.report;
  const SVG = "http://www.w3.org/2000/svg";
  const COLORS = {
    params: "#59a14f", master_params: "#8cd17d", grads: "#f28e2b",
    optimizer: "#b07aa1", state: "#9c755f", data: "#bab0ac",
    activations: "#4e79a7", workspace: "#e15759"
  };

  function fmtBytes(n) {
    if (n === null || n === undefined) return "n/a";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let v = n, u = 0;
    while (v >= 1024 && u < units.length - 1) { v /= 1024; ++u; }
    return u === 0 ? n + " B" : v.toFixed(2) + " " + units[u];
  }
  function fmtFlops(n) {
    const units = ["FLOP", "kFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP"];
    let v = n, u = 0;
    while (v >= 1000 && u < units.length - 1) { v /= 1000; ++u; }
    return u === 0 ? n + " FLOP" : v.toFixed(2) + " " + units[u];
  }
  function scopeName(s) { return s === "" ? "(top level)" : s; }
  function setText(id, text) { document.getElementById(id).textContent = text; }
  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function svgEl(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function row(tbody, cells) {
    const tr = document.createElement("tr");
    for (const c of cells) {
      const td = el("td", c.num ? {class: "num"} : {});
      if (c.node) td.appendChild(c.node); else td.textContent = c.text;
      tr.appendChild(td);
    }
    tbody.appendChild(tr);
  }

  // Headline figures.
  const peak = report.peak;
  setText("title", "memory report of @" + data.function);
  setText("subtitle", data.num_parameters + " parameters in " +
          data.num_parameter_tensors + " tensors, optimizer " +
          data.optimizer + "; " + report.timeline.length +
          " program points, " + data.buffers.length + " scratch buffers");
  setText("peak-value", fmtBytes(peak.bytes));
  setText("peak-bytes", String(peak.bytes));
  setText("peak-index", String(peak.index));
  setText("peak-op", peak.op);
  setText("peak-scope", scopeName(peak.scope));
  setText("arena-value", fmtBytes(report.arena_bytes));
  setText("arena-bytes", String(report.arena_bytes));
  setText("lower-bound-value", fmtBytes(report.lower_bound_bytes));
  setText("lower-bound-bytes", String(report.lower_bound_bytes));
  setText("arena-ratio", report.lower_bound_bytes > 0 && report.arena_bytes !== null
          ? (report.arena_bytes / report.lower_bound_bytes).toFixed(3) : "n/a");
  let total = 0;
  for (const k in report.pools) total += report.pools[k];
  setText("total-value", fmtBytes(total));
  setText("total-bytes", String(total));
  setText("flops-value", fmtFlops(report.forward_flops) + " / " +
          fmtFlops(report.backward_flops));
  setText("recompute-flops", fmtFlops(report.recompute_flops));

  // Pools at the peak.
  const poolBody = document.querySelector("#pools tbody");
  for (const k in report.pools) {
    const bytes = report.pools[k];
    const share = total > 0 ? bytes / total : 0;
    const sw = el("span", {class: "swatch", style: "background:" + COLORS[k]});
    const name = el("span");
    name.appendChild(sw);
    name.appendChild(document.createTextNode(k));
    const bar = el("span", {class: "bar",
      style: "width:" + Math.round(300 * share) + "px;background:" + COLORS[k]});
    row(poolBody, [{node: name}, {text: fmtBytes(bytes), num: true},
                   {text: String(bytes), num: true},
                   {text: (100 * share).toFixed(1) + "%", num: true},
                   {node: bar}]);
  }
  row(poolBody, [{text: "total"}, {text: fmtBytes(total), num: true},
                 {text: String(total), num: true}, {text: "100.0%", num: true},
                 {text: ""}]);

  // Axes shared by both charts.
  const W = 1150, ML = 80, MR = 20, MT = 14;
  const n = Math.max(report.timeline.length, 1);
  const x = i => ML + (W - ML - MR) * i / n;
  function yAxis(svg, y, max, height) {
    const g = svgEl("g", {class: "axis"});
    for (let t = 0; t <= 4; ++t) {
      const v = max * t / 4;
      g.appendChild(svgEl("line", {x1: ML - 4, x2: W - MR, y1: y(v), y2: y(v),
                                   stroke: t ? "#eee" : "#999"}));
      g.appendChild(svgEl("text", {x: ML - 8, y: y(v) + 4,
                                   "text-anchor": "end"}, fmtBytes(Math.round(v))));
    }
    for (let t = 0; t <= 10; ++t) {
      const i = Math.round((n - 1) * t / 10);
      g.appendChild(svgEl("text", {x: x(i), y: height - 6,
                                   "text-anchor": "middle"}, String(i)));
    }
    svg.appendChild(g);
  }
  function marker(svg, xpos, top, bottom, color, label, id) {
    const attrs = {x1: xpos, x2: xpos, y1: top, y2: bottom, stroke: color,
                   "stroke-width": 1.5, "stroke-dasharray": "4 3"};
    if (id) attrs.id = id;
    svg.appendChild(svgEl("line", attrs));
    svg.appendChild(svgEl("text", {x: xpos + 4, y: top + 10, fill: color},
                          label));
  }

  // Timeline: activations, grads stacked on top, as step functions.
  const tl = document.getElementById("timeline");
  const TH = 340, TB = TH - 24;
  const maxBytes = Math.max(1, report.arena_bytes || 0,
                            report.lower_bound_bytes, peak.bytes);
  const ty = v => TB - (TB - MT) * v / maxBytes;
  yAxis(tl, ty, maxBytes, TH);
  function stepPath(lower, upper) {
    let d = "M" + x(0) + "," + ty(lower(0));
    for (let i = 0; i < report.timeline.length; ++i)
      d += "L" + x(i) + "," + ty(upper(i)) + "L" + x(i + 1) + "," + ty(upper(i));
    for (let i = report.timeline.length - 1; i >= 0; --i)
      d += "L" + x(i + 1) + "," + ty(lower(i)) + "L" + x(i) + "," + ty(lower(i));
    return d + "Z";
  }
  const pts = report.timeline;
  tl.appendChild(svgEl("path", {id: "timeline-activations", class: "area",
    d: stepPath(() => 0, i => pts[i].activations),
    fill: COLORS.activations, "fill-opacity": 0.85}));
  tl.appendChild(svgEl("path", {id: "timeline-grads", class: "area",
    d: stepPath(i => pts[i].activations, i => pts[i].bytes),
    fill: COLORS.grads, "fill-opacity": 0.85}));
  // The arena's label goes right, the bound's left: they often coincide.
  function hline(svg, y, value, color, label, id, left) {
    svg.appendChild(svgEl("line", {id: id, x1: ML, x2: W - MR, y1: y(value),
      y2: y(value), stroke: color, "stroke-width": 1.5,
      "stroke-dasharray": "6 3"}));
    svg.appendChild(svgEl("text", {x: left ? ML + 4 : W - MR - 4,
      y: y(value) + (left ? 12 : -4), "text-anchor": left ? "start" : "end",
      fill: color}, label + " " + fmtBytes(value)));
  }
  hline(tl, ty, report.lower_bound_bytes, "#2a9d8f", "lower bound",
        "lower-bound-line", true);
  if (report.arena_bytes !== null)
    hline(tl, ty, report.arena_bytes, "#e15759", "arena", "arena-line", false);
  if (data.first_backward_index >= 0)
    marker(tl, x(data.first_backward_index), MT, TB, "#888",
           "backward", "backward-marker");
  if (peak.index >= 0)
    marker(tl, x(peak.index + 0.5), MT, TB, "#d62728",
           "peak " + fmtBytes(peak.bytes) + " at " + peak.index + " " + peak.op,
           "peak-marker");
  const legend = document.getElementById("legend");
  for (const k of ["activations", "grads"]) {
    const s = el("span");
    s.appendChild(el("span", {class: "swatch", style: "background:" + COLORS[k]}));
    s.appendChild(document.createTextNode(k));
    legend.appendChild(s);
  }

  // Hover: the program point under the cursor.
  const tip = document.getElementById("tooltip");
  tl.addEventListener("mousemove", ev => {
    const r = tl.getBoundingClientRect();
    const i = Math.floor((ev.clientX - r.left - ML) / (W - ML - MR) * n);
    if (i < 0 || i >= pts.length) { tip.style.display = "none"; return; }
    const p = pts[i];
    tip.textContent = "point " + i + ": " + p.op +
      (p.scope ? " (" + p.scope + ")" : "") + " - " + fmtBytes(p.bytes) +
      " live (activations " + fmtBytes(p.activations) + ", grads " +
      fmtBytes(p.grads) + ")";
    tip.style.display = "block";
    tip.style.left = (ev.clientX + 12) + "px";
    tip.style.top = (ev.clientY + 12) + "px";
  });
  tl.addEventListener("mouseleave", () => { tip.style.display = "none"; });

  // Arena layouts: one rectangle per buffer of the arena's memory,
  // [start, end] x [offset, +size).
  const live = new Set(data.live_at_peak);
  function layout(id, memory, bytes, height) {
    const ly = document.getElementById(id);
    const LB = height - 24;
    const arena = Math.max(1, bytes);
    const oy = v => LB - (LB - MT) * v / arena;
    yAxis(ly, oy, arena, height);
    for (const b of data.buffers) {
      if (b.memory !== memory || b.offset === null || b.bytes === 0) continue;
      const rect = svgEl("rect", {x: x(b.start), width: Math.max(1, x(b.end + 1) - x(b.start)),
        y: oy(b.offset + b.bytes), height: Math.max(1, oy(b.offset) - oy(b.offset + b.bytes)),
        fill: COLORS[b.pool], "fill-opacity": live.has(b.id) ? 0.95 : 0.55,
        stroke: "#fff", "stroke-width": 0.5});
      rect.appendChild(svgEl("title", {}, "buffer " + b.id + " " + b.type + ", " +
        fmtBytes(b.bytes) + " at offset " + b.offset + ", live [" + b.start +
        ", " + b.end + "], " + b.op + " in " + scopeName(b.scope)));
      ly.appendChild(rect);
    }
    if (peak.index >= 0)
      marker(ly, x(peak.index + 0.5), MT, LB, "#d62728", "peak", id + "-peak");
  }
  layout("layout", "device", report.arena_bytes || report.lower_bound_bytes, 300);

  // The second memory, under --offload: its pools, its arena (the saved
  // activations among its buffers), what each step copies, its layout.
  if (report.host) {
    const h = report.host;
    document.getElementById("host-memory").hidden = false;
    const hostBody = document.querySelector("#host tbody");
    const lines = Object.keys(h.pools).map(k => [k, h.pools[k]]);
    lines.push(["host arena", h.arena_bytes],
               ["of which saved activations", h.saved_activation_bytes],
               ["total", h.total_bytes],
               ["copied to the host per step", h.to_host_bytes],
               ["copied to the device per step", h.to_device_bytes]);
    for (const [name, bytes] of lines)
      row(hostBody, [{text: name}, {text: fmtBytes(bytes), num: true},
                     {text: String(bytes), num: true}]);
    layout("host-layout", "host", h.arena_bytes, 200);
  }

  // Buffers live at the peak, largest first.
  const byId = new Map(data.buffers.map(b => [b.id, b]));
  const peakBody = document.querySelector("#peak-buffers tbody");
  for (const id of data.live_at_peak) {
    const b = byId.get(id);
    row(peakBody, [{text: String(b.id)}, {text: b.type},
                   {text: fmtBytes(b.bytes) + " (" + b.bytes + ")", num: true},
                   {text: b.pool}, {text: scopeName(b.scope)},
                   {text: b.op + (b.producer >= 0 ? " @" + b.producer : "")},
                   {text: "[" + b.start + ", " + b.end + "]"},
                   {text: b.offset === null ? "-" : String(b.offset), num: true}]);
  }

  // Saved activations by scope.
  const scopeBody = document.querySelector("#scopes tbody");
  let maxScope = 1;
  for (const s in report.by_scope) maxScope = Math.max(maxScope, report.by_scope[s]);
  for (const s in report.by_scope) {
    const bytes = report.by_scope[s];
    row(scopeBody, [{text: scopeName(s)},
                    {text: fmtBytes(bytes) + " (" + bytes + ")", num: true},
                    {node: el("span", {class: "bar", style: "width:" +
                      Math.round(300 * bytes / maxScope) + "px;background:" +
                      COLORS.activations})}]);
  }
  document.body.setAttribute("data-rendered", "true");
})();
</script>
</body>
</html>
)html";

std::string memopt::renderMemoryReportHtml(const MemoryAccount &account,
                                           const ReportContext &context) {
  Json data = Json::object();
  data["function"] = context.functionName;
  data["optimizer"] = context.optimizer;
  data["num_parameters"] = account.getNumParameters();
  data["num_parameter_tensors"] = account.getNumParameterTensors();
  data["loss_index"] = account.getLossIndex();
  data["first_backward_index"] = account.getFirstBackwardIndex();
  data["report"] = buildMemoryReport(account);

  Json buffers = Json::array();
  for (const AccountedBuffer &buffer : account.getBuffers()) {
    std::string type;
    llvm::raw_string_ostream os(type);
    mlir::memref::AllocOp alloc = buffer.interval.alloc;
    os << alloc.getType();
    Json offset = nullptr;
    if (buffer.offset)
      offset = *buffer.offset;
    buffers.push_back(Json{{"id", buffer.interval.id},
                           {"type", type},
                           {"bytes", buffer.getSizeBytes()},
                           {"pool", getMemoryPoolName(buffer.pool).str()},
                           {"memory", buffer.host ? "host" : "device"},
                           {"scope", buffer.scope},
                           {"op", getReportedOpName(buffer.producer).str()},
                           {"producer", buffer.producerIndex},
                           {"start", buffer.interval.start},
                           {"end", buffer.interval.end},
                           {"offset", std::move(offset)}});
  }
  data["buffers"] = std::move(buffers);
  Json liveAtPeak = Json::array();
  for (unsigned index : account.getBuffersLiveAtPeak())
    liveAtPeak.push_back(account.getBuffers()[index].interval.id);
  data["live_at_peak"] = std::move(liveAtPeak);

  // '<' only occurs inside JSON strings, where \u003c is the same character.
  std::string json = data.dump(-1, ' ', /*ensure_ascii=*/false,
                               Json::error_handler_t::replace);
  std::string escaped;
  escaped.reserve(json.size());
  for (char c : json) {
    if (c == '<')
      escaped += "\\u003c";
    else
      escaped += c;
  }

  llvm::StringRef page(kTemplate);
  auto [before, after] = page.split("@DATA@");
  return (before + escaped + after).str();
}
