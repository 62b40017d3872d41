#pragma once

// The two Gloos lockstep builds against: Debian's (2022), whose rendezvous takes stores by
// reference, and the one a pip torch links into libtorch_cpu (CMakeLists.txt), which takes
// them by shared_ptr. These pick whichever the headers offer.

#include <memory>
#include <string>
#include <type_traits>

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/device.h>

namespace lockstep::gloo_compat {

using StorePtr = std::shared_ptr<gloo::rendezvous::Store>;

/// `store`'s keys under `prefix`; `store` must outlive it.
inline std::shared_ptr<gloo::rendezvous::PrefixStore> prefix_store(const std::string& prefix, const StorePtr& store) {
  if constexpr (std::is_constructible_v<gloo::rendezvous::PrefixStore, std::string, StorePtr>) {
    return std::make_shared<gloo::rendezvous::PrefixStore>(prefix, store);
  } else {
    return std::make_shared<gloo::rendezvous::PrefixStore>(prefix, *store);
  }
}

namespace detail {
template <typename Context, typename = void>
struct TakesStorePointer : std::false_type {};
template <typename Context>
struct TakesStorePointer<Context,
                         std::void_t<decltype(std::declval<Context&>().connectFullMesh(
                             std::declval<StorePtr>(), std::declval<std::shared_ptr<gloo::transport::Device>&>()))>>
    : std::true_type {};
}  // namespace detail

/// Connects `context` to every other rank, meeting them through `store`.
template <typename Context>
void connect_full_mesh(Context& context, const StorePtr& store, std::shared_ptr<gloo::transport::Device>& device) {
  if constexpr (detail::TakesStorePointer<Context>::value) {
    context.connectFullMesh(store, device);
  } else {
    context.connectFullMesh(*store, device);
  }
}

}  // namespace lockstep::gloo_compat
