// CPU reference of kernels/sampling.h: the same definitions, with a full sort.
#ifndef TANDEM_KERNELS_SAMPLING_REFERENCE_H_
#define TANDEM_KERNELS_SAMPLING_REFERENCE_H_

#include <cstdint>

#include "kernels/sampling_params.h"

namespace tandem::kernels {

int32_t GreedySampleReference(const float* logits, int vocab);
int32_t TopKTopPSampleReference(const float* logits, int vocab, const SamplingRowParams& params);

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_SAMPLING_REFERENCE_H_
