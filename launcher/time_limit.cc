#include "launcher/time_limit.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <vector>

#include "runtime/process_stops.h"
#include "runtime/str.h"

namespace ddp::launcher {
namespace {

// Less the time the process was stopped (Note [Time the process was
// stopped] in runtime/process_stops.h): a suspended Slurm job's end moves
// by the suspension, so the budget does too.
double secondsBetween(TimeLimit::Clock::time_point from, TimeLimit::Clock::time_point to) {
  return std::chrono::duration<double>(stops::runningBetween(from, to)).count();
}

// Digits only, as sbatch --time's fields.
std::optional<long long> wholeNumber(std::string_view text) {
  long long value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || value < 0)
    return std::nullopt;
  return value;
}

// sbatch --time's forms with a colon or a day count.
std::optional<double> slurmDuration(std::string_view text) {
  std::optional<long long> days;
  if (const std::size_t dash = text.find('-'); dash != std::string_view::npos) {
    days = wholeNumber(text.substr(0, dash));
    if (!days) return std::nullopt;
    text.remove_prefix(dash + 1);
  }
  std::vector<long long> fields;
  for (;;) {
    const std::size_t colon = text.find(':');
    const auto field = wholeNumber(text.substr(0, colon));
    if (!field) return std::nullopt;
    fields.push_back(*field);
    if (colon == std::string_view::npos) break;
    text.remove_prefix(colon + 1);
  }
  if (fields.size() > 3) return std::nullopt;
  // With days: hours[:minutes[:seconds]]. Without: minutes:seconds or
  // hours:minutes:seconds (a single field is a bare number, refused).
  static constexpr double kUnits[] = {3600, 60, 1};
  std::size_t first = 0;
  if (!days) {
    if (fields.size() < 2) return std::nullopt;
    first = 3 - fields.size();
  }
  double seconds = static_cast<double>(days.value_or(0)) * 86400;
  for (std::size_t i = 0; i < fields.size(); ++i)
    seconds += static_cast<double>(fields[i]) * kUnits[first + i];
  return seconds;
}

}  // namespace

std::optional<double> parseDuration(std::string_view text) {
  std::optional<double> seconds;
  if (text.find_first_of(":-") != std::string_view::npos) {
    seconds = slurmDuration(text);
  } else if (text.size() >= 2) {
    static constexpr std::string_view kUnitNames = "smhd";
    static constexpr double kUnitSeconds[] = {1, 60, 3600, 86400};
    const std::size_t unit = kUnitNames.find(text.back());
    if (unit == std::string_view::npos) return std::nullopt;
    const std::string_view number = text.substr(0, text.size() - 1);
    double value = 0;
    const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (error != std::errc() || end != number.data() + number.size()) return std::nullopt;
    seconds = value * kUnitSeconds[unit];
  }
  if (!seconds || !(*seconds > 0) || !std::isfinite(*seconds)) return std::nullopt;
  return seconds;
}

std::string durationText(double seconds) {
  if (seconds < 60) return str(fixed(std::max(seconds, 0.0), 2), " s");
  const auto whole = static_cast<long long>(seconds);
  const long long days = whole / 86400, hours = whole / 3600 % 24, minutes = whole / 60 % 60;
  char text[48];
  if (days > 0) {
    std::snprintf(text, sizeof text, "%lld-%02lld:%02lld:%02lld", days, hours, minutes, whole % 60);
  } else {
    std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", hours, minutes, whole % 60);
  }
  return text;
}

TimeLimit::TimeLimit(double limitSeconds, Clock::time_point start, bool writesCheckpoints,
                     bool savesModel)
    : limit_(limitSeconds),
      start_(start),
      writesCheckpoints_(writesCheckpoints),
      savesModel_(savesModel) {}

void TimeLimit::writeStarted(Clock::time_point now) {
  std::lock_guard lock(mutex_);
  writeStart_ = now;
}

void TimeLimit::writeDone(Clock::time_point now) {
  std::lock_guard lock(mutex_);
  if (!writeStart_) return;
  longestWrite_ = std::max(longestWrite_, secondsBetween(*writeStart_, now));
  writeStart_.reset();
}

void TimeLimit::expectWrites(double checkpointSeconds, double modelSeconds) {
  std::lock_guard lock(mutex_);
  expectedCheckpoint_ = checkpointSeconds;
  expectedModel_ = modelSeconds;
}

double TimeLimit::reserveSeconds() const {
  // A timed checkpoint stands for --save-model's weights too, which it holds
  // with more.
  const bool timed = longestWrite_ > 0;
  const double checkpoint = timed ? longestWrite_ : expectedCheckpoint_.value_or(0.0);
  const double model = timed ? longestWrite_ : expectedModel_.value_or(0.0);
  // The stop's checkpoint waits for one still being written.
  const double checkpoints = !writesCheckpoints_ ? 0.0 : writeStart_ ? 2.0 : 1.0;
  return checkpoint * checkpoints + (savesModel_ ? model : 0.0);
}

bool TimeLimit::timeUp(double secondsToNextCheck, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  const double elapsed = secondsBetween(start_, now);
  const double writes = reserveSeconds();
  if (elapsed + secondsToNextCheck + writes < limit_) return false;
  stoppedAt_ = elapsed;
  keptForStretch_ = secondsToNextCheck;
  keptForWrites_ = writes;
  writesCounted_ = longestWrite_ > 0     ? WritesCounted::kTimed
                   : expectedCheckpoint_ ? WritesCounted::kExpected
                                         : WritesCounted::kNone;
  return true;
}

std::string TimeLimit::stopText() const {
  std::lock_guard lock(mutex_);
  std::string writes;
  if (writesCounted_ == WritesCounted::kTimed) {
    writes = str(" and the last writes ", fixed(keptForWrites_, 2), " s");
  } else if (writesCounted_ == WritesCounted::kExpected) {
    writes = str(" and the last writes ", fixed(keptForWrites_, 2),
                 " s (at the rate of a write timed at start-up: no checkpoint had been written "
                 "yet)");
  } else if (writesCheckpoints_ || savesModel_) {
    writes = " (and nothing was kept for the last writes: no checkpoint had been written to time)";
  }
  return str("at ", durationText(stoppedAt_), " of ", durationText(limit_),
             ", the steps to the next stop check could take up to ", fixed(keptForStretch_, 2),
             " s", writes);
}

bool TimeLimit::endedPastLimit(Clock::time_point now) const {
  return secondsBetween(start_, now) > limit_;
}

std::string TimeLimit::endText(Clock::time_point now) const {
  const double left = limit_ - secondsBetween(start_, now);
  if (left >= 0) {
    return str("--time-limit ", durationText(limit_), ": the run ended ", fixed(left, 2),
               " s before it");
  }
  return str("--time-limit ", durationText(limit_), ": the run ended ", fixed(-left, 2),
             " s after it: its last steps or writes took longer than the longest before them");
}

}  // namespace ddp::launcher
