//===- Progress.cpp - What rank 0 reports about each step -----------------===//

#include "smprt/train/Progress.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <sys/ioctl.h>
#include <unistd.h>

namespace smprt {
namespace {

std::string format(const char *fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

/// 12345 -> "12345", 1.5e6 -> "1.50M" (compact lines).
std::string shortCount(double v) {
  if (v >= 1e9)
    return format("%.2fG", v / 1e9);
  if (v >= 1e6)
    return format("%.2fM", v / 1e6);
  if (v >= 1e4)
    return format("%.1fk", v / 1e3);
  return format("%.1f", v);
}

int terminalColumns() {
  struct winsize ws;
  if (::ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20)
    return ws.ws_col;
  return 0; // unknown (not a terminal: a launcher's pipe)
}

} // namespace

std::string formatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0)
    return "-";
  long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  snprintf(buf, sizeof(buf), "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60,
           s % 60);
  return buf;
}

std::string jsonNumber(double v) {
  if (!std::isfinite(v))
    return "null";
  return format("%.9g", v);
}

Reporter::~Reporter() {
  if (metrics_)
    std::fclose(metrics_);
}

Status Reporter::openMetrics(const std::string &path, bool append) {
  metrics_ = std::fopen(path.c_str(), append ? "a" : "w");
  if (!metrics_)
    return Status::failure(path + ": cannot write (" + std::strerror(errno) +
                           ")");
  return Status::success();
}

Status Reporter::openTensorBoard(const std::string &dir) {
  return events_.open(dir);
}

std::string Reporter::progressLine(const StepRecord &rec, int64_t steps,
                                   double seconds, bool compact) const {
  double perStep = seconds / std::max<int64_t>(1, steps);
  double samples = facts_.globalBatch / std::max(perStep, 1e-9);
  double tokens = samples * facts_.tokensPerSample;
  double flops = facts_.stepFlops > 0
                     ? facts_.stepFlops / facts_.numRanks / std::max(perStep, 1e-9)
                     : 0;
  double done = static_cast<double>(rec.step - facts_.firstStep);
  double eta = rec.elapsed / std::max(1.0, done) *
               static_cast<double>(facts_.totalSteps - rec.step);
  std::string sep = compact ? "  " : " | ";
  std::string s = (compact ? "step " : "iteration ") + std::to_string(rec.step) +
                  "/" + std::to_string(facts_.totalSteps);
  s += sep + "loss " + format(compact ? "%.4f" : "%.6f", rec.loss);
  s += sep + "lr " + format(compact ? "%.2e" : "%.3e", rec.lr);
  s += sep + (compact ? "gnorm " : "grad norm ") + format("%.3f", rec.gradNorm);
  if (facts_.tokensPerSample > 0)
    s += sep + (compact ? shortCount(tokens) + " tok/s"
                        : format("%.0f", tokens) + " tokens/s");
  else
    s += sep + (compact ? shortCount(samples) : format("%.1f", samples)) +
         " samples/s";
  if (flops > 0) {
    if (!compact)
      s += sep + format("%.3g", flops / 1e12) + " TFLOP/s/device";
    if (facts_.peakFlops > 0)
      s += sep + "MFU " + format("%.1f%%", 100 * flops / facts_.peakFlops);
  }
  s += sep + format(perStep < 10 ? "%.1f" : "%.0f", perStep * 1e3) + " ms/step";
  if (rec.lossScale > 0)
    s += sep + "loss scale " + format("%g", rec.lossScale) +
         (rec.skipped ? " (skipped)" : "");
  if (!compact)
    s += sep + "elapsed " + formatDuration(rec.elapsed);
  s += sep + "ETA " + formatDuration(eta);
  return s;
}

std::string Reporter::metricsRow(const StepRecord &rec) const {
  double perStep = std::max(rec.seconds, 1e-9);
  double flops =
      facts_.stepFlops > 0 ? facts_.stepFlops / facts_.numRanks / perStep : NAN;
  double mfu = facts_.peakFlops > 0 ? flops / facts_.peakFlops : NAN;
  std::string row =
      "{\"step\": " + std::to_string(rec.step) +
      ", \"loss\": " + jsonNumber(rec.loss) +
      ", \"lr\": " + jsonNumber(rec.lr) +
      ", \"grad_norm\": " + jsonNumber(rec.gradNorm) +
      ", \"samples_per_s\": " + jsonNumber(rec.samplesPerSecond) +
      ", \"tokens_per_s\": " +
      (facts_.tokensPerSample > 0
           ? jsonNumber(rec.samplesPerSecond * facts_.tokensPerSample)
           : "null") +
      ", \"tflops_per_device\": " + jsonNumber(flops / 1e12) +
      ", \"mfu\": " + jsonNumber(mfu) + ", \"peak_flops\": " +
      jsonNumber(facts_.peakFlops > 0 ? facts_.peakFlops : NAN) +
      ", \"step_time\": " + jsonNumber(rec.seconds) +
      ", \"time\": " + format("%.6f", rec.wallTime) +
      ", \"elapsed\": " + jsonNumber(rec.elapsed) +
      ", \"peak_bytes\": " + std::to_string(rec.peakBytes) +
      ", \"peak_bytes_per_rank\": [";
  for (size_t r = 0; r < rec.peakBytesPerRank.size(); ++r)
    row += (r ? ", " : "") + std::to_string(rec.peakBytesPerRank[r]);
  row += "]";
  if (rec.deviceBytes) {
    row += ", \"device_bytes\": " + std::to_string(rec.deviceBytes) +
           ", \"device_bytes_per_rank\": [";
    for (size_t r = 0; r < rec.deviceBytesPerRank.size(); ++r)
      row += (r ? ", " : "") + std::to_string(rec.deviceBytesPerRank[r]);
    row += "]";
  }
  if (rec.lossScale > 0)
    row += ", \"loss_scale\": " + jsonNumber(rec.lossScale) +
           ", \"skipped\": " + (rec.skipped ? "true" : "false");
  return row + "}";
}

void Reporter::clearLive() {
  if (liveShown_) {
    std::fputs("\r\033[K", stderr);
    liveShown_ = false;
  }
}

void Reporter::note(const std::string &line) {
  clearLive();
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

Status Reporter::writeMetrics(const std::string &row) {
  if (!metrics_)
    return Status::success();
  if (std::fputs((row + "\n").c_str(), metrics_) < 0 ||
      std::fflush(metrics_) != 0)
    return Status::failure("--metrics: write failed (" +
                           std::string(std::strerror(errno)) + ")");
  return Status::success();
}

Status Reporter::step(const StepRecord &rec) {
  if (printSteps_) {
    clearLive();
    std::printf("step %lld loss %.6f lr %.6g grad_norm %.6f",
                static_cast<long long>(rec.step), rec.loss, rec.lr,
                rec.gradNorm);
    if (rec.lossScale > 0)
      std::printf(" loss_scale %g%s", rec.lossScale,
                  rec.skipped ? " (skipped: gradients overflowed)" : "");
    std::printf("\n");
    std::fflush(stdout);
  }
  if (Status s = writeMetrics(metricsRow(rec)); !s.ok())
    return s;
  if (events_.isOpen()) {
    std::vector<std::pair<std::string, double>> scalars = {
        {"loss", rec.loss}, {"lr", rec.lr}, {"grad_norm", rec.gradNorm},
        {"samples_per_s", rec.samplesPerSecond},
        {"step_time", rec.seconds}};
    if (facts_.tokensPerSample > 0)
      scalars.push_back(
          {"tokens_per_s", rec.samplesPerSecond * facts_.tokensPerSample});
    if (facts_.stepFlops > 0) {
      double flops =
          facts_.stepFlops / facts_.numRanks / std::max(rec.seconds, 1e-9);
      scalars.push_back({"tflops_per_device", flops / 1e12});
      if (facts_.peakFlops > 0)
        scalars.push_back({"mfu", flops / facts_.peakFlops});
    }
    if (rec.lossScale > 0)
      scalars.push_back({"loss_scale", rec.lossScale});
    Status s = events_.scalars(rec.step, rec.wallTime, scalars);
    if (!s.ok())
      return s;
  }
  windowSteps_ += 1;
  windowSeconds_ += rec.seconds;
  bool first = rec.step == facts_.firstStep + 1,
       last = rec.step == facts_.totalSteps;
  if (mode_ == ProgressMode::Log &&
      (first || last || (logEvery_ > 0 && rec.step % logEvery_ == 0))) {
    std::fprintf(stderr, "%s\n",
                 progressLine(rec, windowSteps_, windowSeconds_, false).c_str());
    std::fflush(stderr);
    windowSteps_ = 0;
    windowSeconds_ = 0;
  } else if (mode_ == ProgressMode::Live) {
    std::string line = progressLine(rec, 1, rec.seconds, true);
    if (int cols = terminalColumns(); cols > 0 &&
                                      line.size() >= static_cast<size_t>(cols))
      line.resize(cols - 1);
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
    std::fflush(stderr);
    liveShown_ = true;
  }
  return Status::success();
}

Status Reporter::evaluation(const EvalRecord &rec) {
  // smpc --eval-accuracy, --eval-metrics: the metrics and the labels they
  // counted (a metric of no label is NaN: none shown).
  std::vector<std::pair<std::string, double>> metrics;
  if (rec.labels > 0)
    metrics = rec.metrics;
  std::string printed, noted, counted;
  for (const auto &[name, value] : metrics) {
    printed += " " + name + format(" %.6f", value);
    noted += " | " + name + format(" %.4f", value);
    counted += ", \"eval_" + name + "\": " + jsonNumber(value);
  }
  if (!metrics.empty())
    counted += ", \"eval_labels\": " + std::to_string(rec.labels);
  if (printSteps_) {
    clearLive();
    std::printf("eval step %lld loss %.6f samples %lld%s\n",
                static_cast<long long>(rec.step), rec.loss,
                static_cast<long long>(rec.samples), printed.c_str());
    std::fflush(stdout);
  }
  if (mode_ != ProgressMode::None)
    note("evaluation after iteration " + std::to_string(rec.step) +
         " | eval loss " + format("%.6f", rec.loss) + noted + " | " +
         std::to_string(rec.samples) + " samples in " +
         std::to_string(rec.batches) + " batches | " +
         format("%.2f", rec.seconds) + " s");
  if (Status s =
          writeMetrics("{\"step\": " + std::to_string(rec.step) +
                       ", \"eval_loss\": " + jsonNumber(rec.loss) + counted +
                       ", \"eval_samples\": " + std::to_string(rec.samples) +
                       ", \"eval_batches\": " + std::to_string(rec.batches) +
                       ", \"eval_time\": " + jsonNumber(rec.seconds) +
                       ", \"time\": " + format("%.6f", rec.wallTime) + "}");
      !s.ok())
    return s;
  std::vector<std::pair<std::string, double>> values{{"eval/loss", rec.loss}};
  for (const auto &[name, value] : metrics)
    values.push_back({"eval/" + name, value});
  if (events_.isOpen())
    return events_.scalars(rec.step, rec.wallTime, values);
  return Status::success();
}

void Reporter::finish() {
  if (liveShown_) {
    std::fputs("\n", stderr);
    std::fflush(stderr);
    liveShown_ = false;
  }
}

} // namespace smprt
