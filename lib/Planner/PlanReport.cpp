//===- PlanReport.cpp - The plan as a picture -----------------------------===//
//
// An SVG with the chosen plan's pipeline timeline (its schedule simulated
// with the slowest stage's forward and backward times: F, B = 2F, or BI and
// BW = F for ZB-H1; recomputation adds F to the backward) and a bar per
// pipeline stage with its predicted memory per device against the device's.
//
//===----------------------------------------------------------------------===//

#include "smp/Planner/Planner.h"

#include "smp/Schedule/PipelineSchedule.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

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

} // namespace

std::string planReportSvg(const PlanResult &result, const PlanRequest &req) {
  const Plan &p = result.best;
  std::string s;
  llvm::raw_string_ostream os(s);
  const double width = 1000, rowHeight = 22, left = 90, top = 70;
  int pp = static_cast<int>(p.pp), m = static_cast<int>(p.microbatches),
      v = static_cast<int>(p.virtualStages);
  auto kind = schedule::parseScheduleKind(p.schedule)
                  .value_or(schedule::ScheduleKind::OneFOneB);
  // One pipeline rank's forward of one micro-batch (of one chunk).
  double slowest = p.stageSeconds.empty()
                       ? 0
                       : *std::max_element(p.stageSeconds.begin(),
                                           p.stageSeconds.end());
  double f = slowest / (p.recompute ? 4.0 : 3.0) / v;
  schedule::Costs costs;
  costs.forward = f;
  costs.backward = (p.recompute ? 3 : 2) * f;
  costs.backwardInput = (p.recompute ? 2 : 1) * f;
  costs.backwardWeight = f;
  schedule::Schedule order = schedule::buildSchedule(kind, pp, m, v);
  schedule::SimulationResult sim =
      order.empty() ? schedule::SimulationResult()
                    : schedule::simulateSchedule(order, pp, m, v, costs);
  double span = std::max(sim.makespan, 1e-12);
  double timelineBottom = top + pp * rowHeight;
  double barsTop = timelineBottom + 70, barsHeight = 160;
  double height = barsTop + barsHeight + 60;

  os << llvm::format("<svg xmlns=\"http://www.w3.org/2000/svg\" "
                     "width=\"%.0f\" height=\"%.0f\" "
                     "font-family=\"sans-serif\" font-size=\"12\">\n",
                     width + left + 20, height)
     << "<text x=\"10\" y=\"20\" font-size=\"15\" font-weight=\"bold\">"
     << escape("smp plan: " + p.summary() + " on " +
               std::to_string(req.devices) + " x " + req.device.name)
     << "</text>\n"
     << "<text x=\"10\" y=\"40\">"
     << llvm::format("predicted step %.4g s, bubble %.1f%%, MFU %.1f%%, "
                     "%.4g samples/s",
                     p.stepSeconds, 100 * p.bubble, 100 * p.mfu,
                     p.samplesPerSecond)
     << "</text>\n"
     << llvm::format("<text x=\"10\" y=\"%.0f\">", top - 8)
     << "pipeline timeline ("
     << escape(p.schedule) << ", one step; F forward, B backward, BI/BW "
     << "input/weight gradient; numbers: micro-batch)</text>\n";
  for (int r = 0; r < pp; ++r) {
    double y = top + r * rowHeight;
    os << llvm::format("<text x=\"10\" y=\"%.0f\">rank %d</text>\n", y + 15, r);
    if (sim.startTimes.size() <= static_cast<size_t>(r))
      continue;
    for (size_t k = 0; k < order[r].size(); ++k) {
      const schedule::Action &a = order[r][k];
      double start = sim.startTimes[r][k];
      if (start < 0)
        continue;
      double dur = a.kind == schedule::Action::F    ? costs.forward
                   : a.kind == schedule::Action::B  ? costs.backward
                   : a.kind == schedule::Action::BI ? costs.backwardInput
                                                    : costs.backwardWeight;
      const char *color = a.kind == schedule::Action::F    ? "#4e79a7"
                          : a.kind == schedule::Action::B  ? "#59a14f"
                          : a.kind == schedule::Action::BI ? "#59a14f"
                                                           : "#a0cbe8";
      double x = left + start / span * width, w = dur / span * width;
      os << llvm::format("<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
                         "height=\"%.2f\" fill=\"%s\" stroke=\"white\" "
                         "stroke-width=\"0.5\"/>\n",
                         x, y, std::max(w, 0.5), rowHeight - 4, color);
      if (w > 14)
        os << llvm::format("<text x=\"%.2f\" y=\"%.2f\" fill=\"white\" "
                           "font-size=\"10\">%d</text>\n",
                           x + 2, y + 13, a.microbatch);
    }
  }
  // Memory per device, per stage.
  double capacity = req.device.memoryBytes;
  double peak = std::max(capacity, p.peakMemory);
  os << llvm::format("<text x=\"10\" y=\"%.0f\">", barsTop - 10)
     << "predicted memory per device of each pipeline stage (line: the "
     << "device's " << llvm::format("%.1f GB", capacity / 1e9) << ")</text>\n";
  double barWidth = std::min(60.0, width / std::max<size_t>(1, p.stageMemory.size()) - 6);
  for (size_t st = 0; st < p.stageMemory.size(); ++st) {
    double h = p.stageMemory[st] / peak * barsHeight;
    double x = left + st * (barWidth + 6);
    os << llvm::format("<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
                       "height=\"%.2f\" fill=\"%s\"/>\n",
                       x, barsTop + barsHeight - h, barWidth, h,
                       p.stageMemory[st] > capacity ? "#e15759" : "#f28e2b")
       << llvm::format("<text x=\"%.2f\" y=\"%.2f\" font-size=\"10\">%.3g "
                       "GB</text>\n",
                       x, barsTop + barsHeight + 14, p.stageMemory[st] / 1e9)
       << llvm::format("<text x=\"%.2f\" y=\"%.2f\" font-size=\"10\">stage "
                       "%zu</text>\n",
                       x, barsTop + barsHeight + 28, st);
  }
  double capY = barsTop + barsHeight - capacity / peak * barsHeight;
  os << llvm::format("<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" "
                     "stroke=\"black\" stroke-dasharray=\"4 2\"/>\n",
                     left, capY, left + width, capY)
     << "</svg>\n";
  return s;
}

} // namespace smp
