// AddonState: what the addon keeps per Node environment (main thread or worker thread), in its instance data.
#pragma once

#include <memory>

#include "js/logger.h"

namespace fsm {

struct AddonState {
  // The JS logger set by setLogger(), or null. Shared with native threads that are logging through it.
  std::shared_ptr<Logger> logger;
};

}  // namespace fsm
