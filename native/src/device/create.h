// createDevice: the one place device kinds are named — a description's `device: {kind, ...options}` becomes a
// Device of that kind (add a kind here, and its files under device/<kind>/).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>

#include "core/program.h"
#include "device/device.h"

namespace fsm {

/** Local device `local`, of the kind `plugin` names, with its memory limit and the run's BLAS threads. Throws
 *  FailureError (kind description) for an unknown or unbuilt kind, or an option the kind does not have. */
std::unique_ptr<Device> createDevice(const Plugin& plugin, size_t local, std::optional<size_t> limitBytes, int blasThreads);

}  // namespace fsm
