// What the tandem-sim tests build their runs from: a request of given lengths (ordinary token ids,
// `salt` making prompts differ) and a step's duration as a node rounds it.
#ifndef TANDEM_TESTS_TOOLS_SIM_SIM_TEST_REQUESTS_H_
#define TANDEM_TESTS_TOOLS_SIM_SIM_TEST_REQUESTS_H_

#include <cmath>
#include <cstdint>
#include <vector>

#include "bench/serve/bench_request.h"
#include "common/backend/sim/step_time_model.h"

namespace tandem::sim {

inline bench::BenchRequest SimTestRequest(int32_t prompt_len, int32_t output_len, int salt = 0) {
  bench::BenchRequest r;
  for (int32_t i = 0; i < prompt_len; ++i) r.prompt_ids.push_back(1000 + (salt * 7919 + i) % 9000);
  r.prompt_len = prompt_len;
  r.output_len = output_len;
  return r;
}

// The node rounds each step to whole nanoseconds.
inline double SimStepSeconds(const StepTimeModel& model, std::vector<SimStepItem> items) {
  return static_cast<double>(std::llround(model.Time(items).total_s() * 1e9)) * 1e-9;
}

}  // namespace tandem::sim

#endif  // TANDEM_TESTS_TOOLS_SIM_SIM_TEST_REQUESTS_H_
