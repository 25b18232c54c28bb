#include "worker/tensor_transfer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#ifdef PKB_HAVE_CUDA
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime.h>
#endif

#include "common/hex.h"
#include "pkb/check.h"

namespace pkb {

namespace {

constexpr size_t kAlign = 256;
size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// The storage a dense tensor with these sizes and strides spans.
size_t span_bytes(const at::Tensor& t) {
  if (t.numel() == 0) return 0;
  int64_t last = 0;
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  return static_cast<size_t>(last + 1) * t.element_size();
}

// Dense (no overlap, no gaps beyond what clone keeps) strides for t.
at::Tensor dense_like(const at::Tensor& t) { return t.is_non_overlapping_and_dense() ? t : t.contiguous(); }

Json tensor_desc(const at::Tensor& t, size_t offset) {
  return {{"kind", "tensor"},
          {"dtype", static_cast<int>(t.scalar_type())},
          {"sizes", t.sizes().vec()},
          {"strides", t.strides().vec()},
          {"offset", offset}};
}

at::Tensor view_of(const Json& d, SharedRegion& r) {
  auto dtype = static_cast<c10::ScalarType>(d.at("dtype").get<int>());
  PKB_CHECK(static_cast<int>(dtype) >= 0 && static_cast<int>(dtype) < static_cast<int>(c10::ScalarType::NumOptions),
            "bad dtype in a tensor descriptor");
  auto sizes = d.at("sizes").get<std::vector<int64_t>>();
  auto strides = d.at("strides").get<std::vector<int64_t>>();
  size_t offset = d.at("offset").get<size_t>();
  PKB_CHECK(sizes.size() == strides.size() && sizes.size() <= 25, "bad tensor descriptor rank");
  // Bounds, with overflow checks: the descriptor may come from the untrusted side.
  const size_t item = c10::elementSize(dtype);
  bool empty = false;
  __int128 last = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    PKB_CHECK(sizes[i] >= 0 && sizes[i] < (int64_t{1} << 48) && strides[i] >= 0 && strides[i] < (int64_t{1} << 48),
              "bad size or stride in a tensor descriptor");
    if (sizes[i] == 0) empty = true;
    else last += static_cast<__int128>(sizes[i] - 1) * strides[i];
  }
  __int128 end = static_cast<__int128>(offset) + (empty ? 0 : (last + 1) * static_cast<__int128>(item));
  PKB_CHECK(offset <= r.bytes() && end <= static_cast<__int128>(r.bytes()),
            "a tensor descriptor points outside its region");
  // The view keeps its region mapped for as long as it lives.
  return at::from_blob(r.data() + offset, sizes, strides, [keep = r.shared_from_this()](void*) {},
                       at::TensorOptions().dtype(dtype).device(r.device()));
}

Json scalar_desc(const ArgValue& v) {
  return std::visit(
      [](const auto& x) -> Json {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, int64_t>) return {{"kind", "int"}, {"value", x}};
        else if constexpr (std::is_same_v<T, double>) {
          uint64_t bits;
          memcpy(&bits, &x, 8);  // exact, NaN and infinities included
          return {{"kind", "float"}, {"bits", bits}};
        } else if constexpr (std::is_same_v<T, bool>) return {{"kind", "bool"}, {"value", x}};
        else if constexpr (std::is_same_v<T, std::string>) return {{"kind", "str"}, {"value", x}};
        else if constexpr (std::is_same_v<T, c10::ScalarType>) return {{"kind", "dtype"}, {"value", static_cast<int>(x)}};
        else if constexpr (std::is_same_v<T, GroupRanks>) return {{"kind", "group"}, {"value", x.ranks}};
        else if constexpr (std::is_same_v<T, None>) return {{"kind", "none"}};
        else return {{"kind", "tensor"}};  // not reached: tensors are placed
      },
      v);
}

ArgValue scalar_from(const Json& d) {
  const std::string k = d.at("kind").get<std::string>();
  if (k == "int") return d.at("value").get<int64_t>();
  if (k == "float") {
    uint64_t bits = d.at("bits").get<uint64_t>();
    double x;
    memcpy(&x, &bits, 8);
    return x;
  }
  if (k == "bool") return d.at("value").get<bool>();
  if (k == "str") return d.at("value").get<std::string>();
  if (k == "dtype") return static_cast<c10::ScalarType>(d.at("value").get<int>());
  if (k == "group") return GroupRanks{d.at("value").get<std::vector<int64_t>>()};
  if (k == "none") return None{};
  PKB_CHECK(false, "unknown argument kind '", k, "'");
}

// Places dense copies of `ts` in `r`; the descriptors, and views if asked.
Json place_tensors(const std::vector<at::Tensor>& ts, SharedRegion& r, bool as_contiguous,
                   std::vector<at::Tensor>* views) {
  Json out = Json::array();
  size_t off = 0;
  for (const auto& t0 : ts) {
    if (!t0.defined()) {
      out.push_back({{"kind", "undefined"}});
      if (views) views->push_back(at::Tensor());
      continue;
    }
    PKB_CHECK(as_contiguous || t0.device().type() == r.device().type(), "an input tensor on ", t0.device(),
              " cannot be placed in a region on ", r.device());
    at::Tensor t = as_contiguous ? t0.contiguous() : dense_like(t0);
    size_t n = span_bytes(t);
    PKB_CHECK(off + n <= r.bytes(), "region of ", r.bytes(), " bytes too small");
    Json d = tensor_desc(t, off);
    at::Tensor v = view_of(d, r);
    v.copy_(t0);
    out.push_back(d);
    if (views) views->push_back(v);
    off = align_up(off + n);
  }
  return out;
}

}  // namespace

SharedRegion::~SharedRegion() {
  if (device_.is_cpu()) {
    if (ptr_ && bytes_) munmap(ptr_, bytes_);
    if (fd_ >= 0) close(fd_);
    return;
  }
#ifdef PKB_HAVE_CUDA
  if (ptr_) {
    if (owner_) cudaFree(ptr_);
    else cudaIpcCloseMemHandle(ptr_);
  }
#endif
}

std::shared_ptr<SharedRegion> SharedRegion::create(size_t bytes, const at::Device& device) {
  std::shared_ptr<SharedRegion> r(new SharedRegion(device));
  r->owner_ = true;
  r->bytes_ = std::max<size_t>(align_up(bytes), kAlign);
  if (device.is_cpu()) {
    r->fd_ = memfd_create("pkb-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    PKB_CHECK(r->fd_ >= 0, "memfd_create: ", strerror(errno));
    PKB_CHECK(ftruncate(r->fd_, static_cast<off_t>(r->bytes_)) == 0, "ftruncate: ", strerror(errno));
    // Sealed: the other process cannot shrink it under this one's mapping.
    PKB_CHECK(fcntl(r->fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0, "F_ADD_SEALS: ",
              strerror(errno));
    r->ptr_ = mmap(nullptr, r->bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd_, 0);
    PKB_CHECK(r->ptr_ != MAP_FAILED, "mmap: ", strerror(errno));
    return r;
  }
#ifdef PKB_HAVE_CUDA
  c10::cuda::set_device(device.index());
  PKB_CUDA_CHECK(cudaMalloc(&r->ptr_, r->bytes_));
  cudaIpcMemHandle_t h;
  PKB_CUDA_CHECK(cudaIpcGetMemHandle(&h, r->ptr_));
  r->ipc_ = to_hex(&h, sizeof(h));
  return r;
#else
  PKB_CHECK(false, "no CUDA in this build");
#endif
}

std::shared_ptr<SharedRegion> SharedRegion::open(const Json& desc, int fd, const at::Device& device) {
  std::shared_ptr<SharedRegion> r(new SharedRegion(device));
  r->bytes_ = desc.at("bytes").get<size_t>();
  if (device.is_cpu()) {
    r->fd_ = fd;
    PKB_CHECK(fd >= 0, "a region came without its file descriptor");
    struct stat st;
    PKB_CHECK(fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) >= r->bytes_ && r->bytes_ > 0,
              "a region is smaller than described");
    int seals = fcntl(fd, F_GET_SEALS);
    PKB_CHECK(seals >= 0 && (seals & F_SEAL_SHRINK), "a region is not sealed against shrinking");
    r->ptr_ = mmap(nullptr, r->bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    PKB_CHECK(r->ptr_ != MAP_FAILED, "mmap of a region: ", strerror(errno));
    return r;
  }
#ifdef PKB_HAVE_CUDA
  if (fd >= 0) close(fd);
  c10::cuda::set_device(device.index());
  cudaIpcMemHandle_t h;
  from_hex(desc.at("ipc").get<std::string>(), &h, sizeof(h));
  PKB_CUDA_CHECK(cudaIpcOpenMemHandle(&r->ptr_, h, cudaIpcMemLazyEnablePeerAccess));
  return r;
#else
  PKB_CHECK(false, "no CUDA in this build");
#endif
}

Json SharedRegion::describe() const {
  Json d = {{"bytes", bytes_}};
  if (!ipc_.empty()) d["ipc"] = ipc_;
  return d;
}

size_t region_bytes_for(const std::vector<at::Tensor>& ts) {
  size_t n = 0;
  for (const auto& t : ts)
    if (t.defined()) n = align_up(n + span_bytes(dense_like(t)));
  return std::max(n, kAlign);
}

Json place_inputs(const Inputs& in, SharedRegion& r, Inputs* views) {
  std::vector<at::Tensor> ts;
  for (const auto& a : in.args())
    if (auto t = std::get_if<at::Tensor>(&a.value)) ts.push_back(*t);
  std::vector<at::Tensor> vs;
  Json tdesc = place_tensors(ts, r, false, &vs);
  Json args = Json::array();
  size_t k = 0;
  if (views) *views = Inputs();
  for (const auto& a : in.args()) {
    Json d;
    if (std::holds_alternative<at::Tensor>(a.value)) {
      d = tdesc[k];
      if (views) views->add(a.name, vs[k]);
      ++k;
    } else {
      d = scalar_desc(a.value);
      if (views) views->add(a.name, a.value);
    }
    d["name"] = a.name;
    args.push_back(d);
  }
  if (r.device().is_cuda()) {
#ifdef PKB_HAVE_CUDA
    PKB_CUDA_CHECK(cudaDeviceSynchronize());  // the copies land before the other process reads
#endif
  }
  return args;
}

Inputs inputs_from(const Json& desc, SharedRegion& r) {
  return inputs_from(desc, [&](int) -> SharedRegion& { return r; }, 0);
}

Inputs inputs_from(const Json& desc, const std::function<SharedRegion&(int)>& region_of, int region) {
  Inputs in;
  for (const auto& d : desc) {
    const std::string k = d.at("kind").get<std::string>();
    if (k == "tensor") in.add(d.at("name").get<std::string>(), view_of(d, region_of(d.value("region", region))));
    else if (k == "undefined") in.add(d.at("name").get<std::string>(), at::Tensor());
    else in.add(d.at("name").get<std::string>(), scalar_from(d));
  }
  return in;
}

Json place_outputs(const Outputs& out, SharedRegion& r) {
  Json d = place_tensors(out, r, true, nullptr);
#ifdef PKB_HAVE_CUDA
  if (r.device().is_cuda()) PKB_CUDA_CHECK(cudaDeviceSynchronize());
#endif
  return d;
}

Outputs outputs_from(const Json& desc, SharedRegion& r) {
  if (!desc.is_array()) throw std::runtime_error("the candidate's outputs are not described as a list");
  Outputs out;
  for (const auto& d : desc) {
    try {
      if (d.at("kind").get<std::string>() == "undefined") {
        out.push_back(at::Tensor());
        continue;
      }
      out.push_back(view_of(d, r).clone());
    } catch (const std::exception& e) {
      throw std::runtime_error(std::string("the candidate's output descriptor is invalid: ") + e.what());
    }
  }
  return out;
}

}  // namespace pkb
