// The harness's side of NOTE [fixed inputs] (pkb/fixed_inputs.h): which inputs a
// problem fixes, copies that leave them out, their checksums and comparisons.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pkb/problem.h"

namespace pkb {

// Argument positions of the fixed input tensors (empty: the problem fixes none).
using FixedSet = std::vector<size_t>;

FixedSet fixed_inputs_of(const Problem& p);
bool is_fixed(const FixedSet& fixed, size_t i);

// A clone of `in` whose fixed tensors are `in`'s own (not copies).
Inputs clone_but_fixed(const Inputs& in, const FixedSet& fixed);
// `in` with its fixed tensors (only_fixed: every other tensor) undefined; the
// other arguments as they are (input_tensor_bytes(without_fixed(...)): the
// bytes a group copies).
Inputs without_fixed(const Inputs& in, const FixedSet& fixed);
Inputs only_fixed(const Inputs& in, const FixedSet& fixed);
// `in` with argument `i` replaced by `value`.
Inputs with_arg(const Inputs& in, size_t i, const at::Tensor& value);

// Per fixed tensor, content_checksum (worker/integrity.h).
std::vector<int64_t> fixed_checksums(const Inputs& in, const FixedSet& fixed);
// The first fixed input whose checksum moved between `before` and `after`, as
// a harness error's text; "" when none did.
std::string fixed_written(const Inputs& in, const FixedSet& fixed, const std::vector<int64_t>& before,
                         const std::vector<int64_t>& after);
// "" or why `copy`'s fixed tensors are not bit for bit `original`'s, naming the
// first that differs; `when` says where ("while timed").
std::string changed_fixed(const Inputs& original, const Inputs& copy, const FixedSet& fixed, const std::string& when);

}  // namespace pkb
