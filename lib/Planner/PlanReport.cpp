//===- PlanReport.cpp - The plan as a picture -----------------------------===//
//
// An SVG of the chosen plan, legible from 1 to thousands of devices:
//
//   - a header with the prediction (step = pipeline + data-parallel
//     gradient all-reduce + optimizer, bubble, MFU, throughput);
//   - the pipeline timeline of one step on a time axis in seconds: the
//     schedule simulated with the slowest stage's forward and backward
//     times (B = 2F, or BI = BW = F for ZB-H1; recomputation adds F to the
//     backward), scaled to the predicted pipeline time, then the gradient
//     all-reduce and the optimizer step. Forwards and backwards of each
//     virtual chunk have their own shade. When a block would be too thin to
//     see, the steady state is cut: warm-up, one steady-state period and
//     cool-down are drawn and the span between them is summarised;
//   - one bar per pipeline stage with its predicted memory per device split
//     into parameters, gradients, optimizer state, activations and
//     workspace, against the device's memory and the plan's limit.
//
//===----------------------------------------------------------------------===//

#include "smp/Planner/Planner.h"

#include "PipelineCosts.h"

#include "smp/Schedule/PipelineSchedule.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace smp {
namespace {

std::string escape(const std::string &s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else
      out += c;
  }
  return out;
}

/// A round step (1, 2 or 5 times a power of ten) near `raw`.
double niceStep(double raw) {
  if (!(raw > 0))
    return 1;
  double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * p)
      return m * p;
  return 10 * p;
}

/// Bytes in the unit that suits them ("70.6 GB", "256 KB").
std::string gb(double bytes) {
  const char *unit = "GB";
  double scale = 1e9;
  if (bytes < 1e6)
    unit = "KB", scale = 1e3;
  else if (bytes < 1e9)
    unit = "MB", scale = 1e6;
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format("%.3g %s", bytes / scale, unit);
  return s;
}

const char *const kForward[] = {"#2f5d8a", "#4e79a7", "#7aa6d4", "#a9c9ea"};
const char *const kBackward[] = {"#2e7d32", "#59a14f", "#8cd17d", "#b6e3a8"};
const char *const kWeightGrad = "#edc948";
const char *const kAllReduce = "#b07aa1";
const char *const kOptimizer = "#9c755f";
const char *const kIdle = "#eeeeee";

struct Category {
  const char *name, *color;
  double MemoryBreakdown::*field;
};
const Category kMemory[] = {
    {"parameters", "#4e79a7", &MemoryBreakdown::parameters},
    {"gradients", "#59a14f", &MemoryBreakdown::gradients},
    {"optimizer state", "#f28e2b", &MemoryBreakdown::optimizerState},
    {"activations", "#e15759", &MemoryBreakdown::activations},
    {"workspace", "#bab0ac", &MemoryBreakdown::workspace},
};

/// Where time goes on the page: one segment [0, T], or, with the steady
/// state cut, [0, a] and [b, T] with a gap between them.
struct TimeAxis {
  double left, width, total;
  double a = 0, b = 0; // the cut (a < b), when `cut`
  bool cut = false;
  static constexpr double kGap = 36;

  double x(double t) const {
    if (!cut)
      return left + t / total * width;
    double shown = a + (total - b), w = width - kGap;
    if (t <= a)
      return left + t / shown * w;
    if (t < b)
      return left + a / shown * w + kGap / 2;
    return left + (a + (t - b)) / shown * w + kGap;
  }
  /// The visible pieces of [t0, t1].
  std::vector<std::pair<double, double>> visible(double t0, double t1) const {
    if (!cut)
      return {{t0, t1}};
    std::vector<std::pair<double, double>> out;
    if (t0 < a)
      out.push_back({t0, std::min(t1, a)});
    if (t1 > b)
      out.push_back({std::max(t0, b), t1});
    return out;
  }
};

void rect(llvm::raw_ostream &os, double x, double y, double w, double h,
          const char *fill, const char *extra = "") {
  os << llvm::format("<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
                     "height=\"%.2f\" fill=\"%s\"%s/>\n",
                     x, y, w, h, fill, extra);
}

void text(llvm::raw_ostream &os, double x, double y, const std::string &s,
          const char *extra = "") {
  os << llvm::format("<text x=\"%.2f\" y=\"%.2f\"%s>", x, y, extra)
     << escape(s) << "</text>\n";
}

/// A legend entry; returns the x after it.
double legendEntry(llvm::raw_ostream &os, double x, double y,
                   const char *color, const std::string &label) {
  rect(os, x, y - 10, 12, 12, color);
  text(os, x + 16, y, label);
  return x + 16 + 6.5 * label.size() + 14;
}

/// The pipeline schedule of plan `p`, simulated.
struct Timeline {
  schedule::Schedule order;
  schedule::SimulationResult sim;
  schedule::Costs costs;
  double scale = 1; // simulated time -> predicted seconds
};

Timeline simulate(const Plan &p) {
  Timeline t;
  int pp = static_cast<int>(p.pp), m = static_cast<int>(p.microbatches),
      v = static_cast<int>(p.virtualStages);
  auto kind = schedule::parseScheduleKind(p.schedule)
                  .value_or(schedule::ScheduleKind::OneFOneB);
  // Each stage's own time, as the planner priced it (PipelineCosts.cpp).
  if (p.stageSeconds.size() == static_cast<size_t>(pp))
    t.costs = planning::pipelineCosts(p.stageSeconds, p.recompute, v, 0);
  t.order = schedule::buildSchedule(kind, pp, m, v);
  if (!t.order.empty())
    t.sim = schedule::simulateSchedule(t.order, pp, m, v, t.costs);
  if (t.sim.makespan > 0 && p.pipelineSeconds > 0)
    t.scale = p.pipelineSeconds / t.sim.makespan;
  return t;
}

/// Cuts the steady state out of the axis when a forward would be under
/// ~5 px: keeps warm-up (until every rank has started its backwards), one
/// period (each chunk's forward and backward once) and cool-down (from the
/// first rank's last forward). Returns the micro-batch steps cut out.
int cutSteadyState(TimeAxis &axis, const Timeline &t, const Plan &p) {
  double s = t.scale;
  // The slowest stage's forward, in simulated time.
  double slowest = t.costs.stageScale.empty()
                       ? 1.0
                       : *std::max_element(t.costs.stageScale.begin(),
                                           t.costs.stageScale.end());
  double forward = t.costs.forward * slowest;
  if (t.sim.startTimes.empty() || forward <= 0 ||
      axis.x(forward * s) - axis.x(0) >= 5)
    return 0;
  double warm = 0, cool = axis.total;
  for (size_t r = 0; r < t.order.size(); ++r) {
    double firstB = -1, lastF = -1;
    for (size_t k = 0; k < t.order[r].size(); ++k) {
      double start = t.sim.startTimes[r][k];
      if (t.order[r][k].kind == schedule::Action::F)
        lastF = start;
      else if (firstB < 0)
        firstB = start;
    }
    warm = std::max(warm, firstB);
    if (lastF >= 0)
      cool = std::min(cool, lastF * s);
  }
  double period = p.virtualStages *
                  (t.costs.forward + t.costs.backward +
                   (p.schedule == "zb-h1" ? t.costs.backwardWeight : 0)) *
                  slowest;
  double a = (warm + period) * s;
  if (cool - a < 0.25 * axis.total)
    return 0; // not enough to gain
  axis.cut = true;
  axis.a = a;
  axis.b = cool;
  int omitted = 0;
  for (size_t k = 0; !t.order.empty() && k < t.order[0].size(); ++k) {
    double start = t.sim.startTimes[0][k] * s;
    if (t.order[0][k].kind == schedule::Action::F && start >= a && start < cool)
      ++omitted;
  }
  return omitted;
}

void drawTimeAxis(llvm::raw_ostream &os, const TimeAxis &axis, double y) {
  // Labels in the unit that suits the step: s, ms or us.
  double unit = axis.total >= 1 ? 1 : axis.total >= 1e-3 ? 1e-3 : 1e-6;
  const char *unitName = unit == 1 ? "s" : unit == 1e-3 ? "ms" : "us";
  os << llvm::format("<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" "
                     "stroke=\"black\"/>\n",
                     axis.left, y, axis.left + axis.width, y);
  auto ticks = [&](double t0, double t1, double pixels) {
    double step =
        niceStep((t1 - t0) / unit / std::max(1.0, pixels / 90)) * unit;
    for (double t = std::ceil(t0 / step) * step; t <= t1 + 1e-12;
         t += step) {
      double x = axis.x(t);
      os << llvm::format("<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" "
                         "y2=\"%.2f\" stroke=\"black\"/>\n",
                         x, y, x, y + 4);
      std::string label;
      llvm::raw_string_ostream(label) << llvm::format("%.4g", t / unit);
      text(os, x - 3 * label.size(), y + 16, label, " font-size=\"10\"");
    }
  };
  if (!axis.cut) {
    ticks(0, axis.total, axis.width);
  } else {
    ticks(0, axis.a, axis.x(axis.a) - axis.left);
    ticks(axis.b, axis.total, axis.left + axis.width - axis.x(axis.b));
  }
  text(os, axis.left + axis.width - 50, y + 30,
       std::string("time (") + unitName + ")");
}

/// The timeline rows; returns the y below them.
double drawTimeline(llvm::raw_ostream &os, const Plan &p, double top,
                    double left, double width) {
  Timeline t = simulate(p);
  double s = t.scale, pipeEnd = t.sim.makespan * s;
  double total = pipeEnd + p.dataParallelSeconds + p.optimizerSeconds;
  TimeAxis axis{left, width, std::max(total, 1e-12)};
  int omitted = cutSteadyState(axis, t, p);
  int pp = static_cast<int>(p.pp);
  double row = pp <= 16 ? 22 : pp <= 64 ? 10 : 4;
  text(os, 10, top - 8,
       "pipeline timeline of one step (" + p.schedule +
           (p.virtualStages > 1
                ? ", " + std::to_string(p.virtualStages) + " chunks per rank"
                : std::string()) +
           "; numbers: micro-batch)");
  for (int r = 0; r < pp; ++r) {
    double y = top + r * row;
    if (row >= 10 || r % 8 == 0)
      text(os, 10, y + std::min(row, 15.0), "rank " + std::to_string(r),
           row < 22 ? " font-size=\"9\"" : "");
    for (auto [a, b] : axis.visible(0, total))
      rect(os, axis.x(a), y, axis.x(b) - axis.x(a), row - 2, kIdle);
    if (t.sim.startTimes.size() <= static_cast<size_t>(r))
      continue;
    for (size_t k = 0; k < t.order[r].size(); ++k) {
      const schedule::Action &act = t.order[r][k];
      double start = t.sim.startTimes[r][k];
      if (start < 0)
        continue;
      int shade = (act.stage / std::max(pp, 1)) % 4; // the virtual chunk
      const char *color = act.kind == schedule::Action::F ? kForward[shade]
                          : act.kind == schedule::Action::BW
                              ? kWeightGrad
                              : kBackward[shade];
      for (auto [a, b] :
           axis.visible(start * s, (start + t.costs.of(act)) * s)) {
        double x = axis.x(a), w = axis.x(b) - x;
        rect(os, x, y, std::max(w, 0.5), row - 2, color,
             w > 3 ? " stroke=\"white\" stroke-width=\"0.5\"" : "");
        if (w > 16 && row >= 20)
          text(os, x + 2, y + 14, std::to_string(act.microbatch),
               " fill=\"white\" font-size=\"10\"");
      }
    }
    // After the last backward: the gradient all-reduce, then the update.
    double x0 = axis.x(pipeEnd), x1 = axis.x(pipeEnd + p.dataParallelSeconds),
           x2 = axis.x(total);
    if (p.dp > 1)
      rect(os, x0, y, std::max(x1 - x0, 1.0), row - 2, kAllReduce);
    rect(os, x1, y, std::max(x2 - x1, 2.0), row - 2, kOptimizer);
  }
  double bottom = top + pp * row;
  if (axis.cut) {
    double x = axis.x(axis.a) + TimeAxis::kGap / 2;
    os << llvm::format("<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" "
                       "stroke=\"black\" stroke-dasharray=\"3 3\"/>\n",
                       x, top - 4, x, bottom + 2);
    std::string note;
    llvm::raw_string_ostream(note)
        << llvm::format("steady state cut at the dashed line: %.3g s, ",
                        axis.b - axis.a)
        << omitted << " of rank 0's "
        << p.microbatches * p.virtualStages << " forwards";
    text(os, std::max(10.0, x - 3.1 * note.size()), bottom + 44, note,
         " font-style=\"italic\"");
  }
  drawTimeAxis(os, axis, bottom + 4);
  return bottom + (axis.cut ? 60 : 44);
}

/// The timeline's legend; returns the y below it.
double drawTimelineLegend(llvm::raw_ostream &os, const Plan &p, double y) {
  double x = 10;
  bool zb = p.schedule == "zb-h1";
  int chunks = static_cast<int>(std::min<int64_t>(p.virtualStages, 4));
  for (int c = 0; c < chunks; ++c)
    x = legendEntry(os, x, y, kForward[c],
                    chunks > 1 ? "F chunk " + std::to_string(c) : "F forward");
  for (int c = 0; c < chunks; ++c)
    x = legendEntry(os, x, y, kBackward[c],
                    (zb ? std::string("BI") : std::string("B")) +
                        (chunks > 1 ? " chunk " + std::to_string(c)
                                    : zb ? " input gradient" : " backward"));
  if (zb)
    x = legendEntry(os, x, y, kWeightGrad, "BW weight gradient");
  if (p.dp > 1)
    x = legendEntry(os, x, y, kAllReduce, "gradient all-reduce (dp)");
  x = legendEntry(os, x, y, kOptimizer, "optimizer");
  legendEntry(os, x, y, kIdle, "idle");
  std::string notes = "F and B include tensor-parallel all-reduces";
  if (p.recompute)
    notes += "; B includes recomputing the forward";
  text(os, 10, y + 18, notes, " font-size=\"11\" fill=\"#555555\"");
  return y + 40;
}

/// Stacked memory bars; returns the y below them.
double drawMemory(llvm::raw_ostream &os, const Plan &p, const PlanRequest &req,
                  double top, double left, double width) {
  double capacity = req.device.memoryBytes,
         limit = capacity * req.memoryFraction;
  // A plan far below the device's memory is drawn to its own scale, the
  // device's line then off the chart.
  bool small = p.peakMemory < 0.05 * capacity;
  double highest = (small ? p.peakMemory : std::max(capacity, p.peakMemory)) *
                   1.05;
  const double height = 180;
  size_t n = p.stageMemory.size();
  size_t worst = n ? std::max_element(p.stageMemory.begin(),
                                      p.stageMemory.end()) -
                         p.stageMemory.begin()
                   : 0;
  std::string over = p.shardRanks() < p.dp
                         ? "groups of " + std::to_string(p.shardRanks()) +
                               " dp ranks"
                         : std::string("dp");
  text(os, 10, top - 30,
       "predicted memory per device of each pipeline stage (" +
           std::to_string(p.dp * p.tp) + " devices each; optimizer " +
           req.optimizer + (p.zeroStage == 1   ? ", its state sharded over " + over
                             : p.zeroStage == 2 ? ", its state and the gradients "
                                                  "sharded over " + over
                             : p.zeroStage == 3 ? ", its state, the gradients and "
                                                  "the parameters sharded over " +
                                                      over
                                                : std::string()) +
           "; from the " + p.memoryModel + " model)");
  // The legend gives each kind's share of the fullest stage.
  double x = 10;
  for (const Category &c : kMemory) {
    std::string label = c.name;
    if (worst < p.stageBreakdown.size())
      label += " " + gb(p.stageBreakdown[worst].*c.field);
    x = legendEntry(os, x, top - 10, c.color, label);
  }
  double base = top + height;
  auto yOf = [&](double bytes) { return base - bytes / highest * height; };
  double unit = highest >= 1e9 ? 1e9 : highest >= 1e6 ? 1e6 : 1e3;
  const char *unitName = unit == 1e9 ? "GB" : unit == 1e6 ? "MB" : "KB";
  double gstep = niceStep(highest / unit / 5);
  for (double g = 0; g * unit <= highest; g += gstep) {
    double y = yOf(g * unit);
    os << llvm::format("<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" "
                       "stroke=\"#dddddd\"/>\n",
                       left, y, left + width, y);
    std::string label;
    llvm::raw_string_ostream(label) << llvm::format("%.4g %s", g, unitName);
    text(os, left - 8 - 6 * label.size(), y + 4, label, " font-size=\"10\"");
  }
  double slot = width / std::max<size_t>(1, n);
  double bar = std::clamp(slot - 6, 2.0, 60.0);
  size_t labelEvery = bar >= 36 ? 1 : static_cast<size_t>(std::ceil(40 / slot));
  for (size_t st = 0; st < n; ++st) {
    double bx = left + st * slot + (slot - bar) / 2, y = base;
    if (st < p.stageBreakdown.size()) {
      for (const Category &c : kMemory) {
        double h = p.stageBreakdown[st].*c.field / highest * height;
        rect(os, bx, y - h, bar, h, c.color);
        y -= h;
      }
    } else {
      double h = p.stageMemory[st] / highest * height;
      rect(os, bx, y - h, bar, h, "#f28e2b");
    }
    if (st % labelEvery)
      continue;
    std::string flags;
    if (st < p.stageRecompute.size() && p.stageRecompute[st])
      flags += " rc";
    if (p.offload)
      flags += " off";
    text(os, bx, base + 14, "stage " + std::to_string(st),
         " font-size=\"10\"");
    text(os, bx, base + 27, gb(p.stageMemory[st]) + flags,
         " font-size=\"10\"");
  }
  for (auto [bytes, dash, label] :
       {std::tuple<double, const char *, std::string>{
            capacity, "6 3", "device " + gb(capacity)},
        {limit, "2 2",
         "plan limit " + gb(limit) + llvm::formatv(" ({0:P0})",
                                                   req.memoryFraction)
                             .str()}}) {
    if (bytes > highest) {
      text(os, left + width - 6.2 * (label.size() + 12), top + 4,
           label + " (off scale)", " font-size=\"10\"");
      top += 14;
      continue;
    }
    double y = yOf(bytes);
    os << llvm::format("<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" "
                       "stroke=\"black\" stroke-dasharray=\"%s\"/>\n",
                       left, y, left + width, y, dash);
    text(os, left + width - 6.2 * label.size(), y - 3, label,
         " font-size=\"10\"");
  }
  return base + 40;
}

} // namespace

std::string planReportSvg(const PlanResult &result, const PlanRequest &req) {
  const Plan &p = result.best;
  const double left = 110, width = 1070;
  std::string body;
  llvm::raw_string_ostream os(body);
  text(os, 10, 22,
       "smp plan: " + p.summary() + " on " + std::to_string(req.devices) +
           " x " + req.device.name,
       " font-size=\"15\" font-weight=\"bold\"");
  std::string line;
  llvm::raw_string_ostream(line)
      << llvm::format("predicted step %.4g s = pipeline %.4g s + gradient "
                      "all-reduce %.4g s + optimizer %.4g s; bubble %.1f%%, "
                      "MFU %.1f%%, %.4g samples/s (global batch %lld)",
                      p.stepSeconds, p.pipelineSeconds, p.dataParallelSeconds,
                      p.optimizerSeconds, 100 * p.bubble, 100 * p.mfu,
                      p.samplesPerSecond,
                      static_cast<long long>(req.globalBatch));
  text(os, 10, 42, line);
  double y = drawTimelineLegend(os, p, 68);
  y = drawTimeline(os, p, y + 14, left, width);
  y = drawMemory(os, p, req, y + 50, left, width);
  std::string s;
  llvm::raw_string_ostream out(s);
  out << llvm::format("<svg xmlns=\"http://www.w3.org/2000/svg\" "
                      "width=\"%.0f\" height=\"%.0f\" "
                      "font-family=\"sans-serif\" font-size=\"12\">\n",
                      left + width + 20, y)
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << body << "</svg>\n";
  return s;
}

} // namespace smp
