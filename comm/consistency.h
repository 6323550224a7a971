// Start-up check that every rank runs the same build on the same model, data
// and options.
//
// Each rank describes what must match as (key, value) items in a fixed order,
// e.g. ("parameter layers.0.weight", "float32 [1024, 784]") or
// ("option batch-size", "64"). Ranks compare a hash first (one all-gather);
// only if some rank differs does rank 0 broadcast its items, so each
// differing rank can name the first item where it departs from rank 0.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"

namespace ddp::comm {

using ConsistencyItems = std::vector<std::pair<std::string, std::string>>;

// Collective. Returns if every rank passed equal items. Otherwise throws
// MismatchError on every rank: a differing rank says "rank R: <key> is <value>
// here but <value> on rank 0"; the others name the differing ranks.
void verifySameOnAllRanks(Communicator& comm, const ConsistencyItems& items);

}  // namespace ddp::comm
