// Live recovery's membership (elastic/membership.h): members as threads over the store a
// launcher hosts, each with its own connections, as worker processes have.
#include <chrono>
#include <future>
#include <thread>

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "elastic/membership.h"
#include "launch/agent_store.h"
#include "launch/store_client.h"
#include "lockstep/error.h"

namespace lockstep::elastic {
namespace {

using namespace std::chrono_literals;

std::vector<int> ids(const std::vector<Member>& members) {
  std::vector<int> out;
  for (const auto& m : members) out.push_back(m.id);
  return out;
}

class MembershipTest : public ::testing::Test {
 protected:
  std::unique_ptr<Membership> member(Member me, std::chrono::milliseconds timeout = 20s) {
    return std::make_unique<Membership>("127.0.0.1", store_.port(), /*attempt=*/0, me, /*launched_world_size=*/3,
                                        timeout);
  }
  // What a member's launcher writes once its process has ended.
  void mark_ended(Member m) {
    auto client = launch::connect_store_client("127.0.0.1", store_.port(), 10s);
    client->set(ended_key(0, m), std::vector<uint8_t>{'1'});
    (void)client.release();  // as the launcher's own clients: left to the end of the process
  }

  launch::AgentStore store_{"127.0.0.1", 0};
};

TEST_F(MembershipTest, TheNextGenerationHoldsTheMembersThatGoOnOnceTheOthersAreMarkedEnded) {
  auto zero = member({0, 0}), two = member({2, 0});
  auto formed_by_zero = std::async(std::launch::async, [&] { zero->form_next(); });
  auto formed_by_two = std::async(std::launch::async, [&] { two->form_next(); });
  // Until worker 1 goes on or is marked ended, nobody forms anything.
  EXPECT_EQ(formed_by_zero.wait_for(300ms), std::future_status::timeout);
  mark_ended({1, 0});
  formed_by_zero.get();
  formed_by_two.get();
  EXPECT_EQ(zero->generation(), 1);
  EXPECT_EQ(ids(zero->members()), (std::vector<int>{0, 2}));
  EXPECT_EQ(ids(two->members()), (std::vector<int>{0, 2}));
  EXPECT_EQ(two->rank(), 1);
  EXPECT_EQ(ids(zero->left()), (std::vector<int>{1}));
}

TEST_F(MembershipTest, AReplacementWaitsUntilRankZeroSeesItAndTheMembersAdmitItAtTheNextChange) {
  auto zero = member({0, 0}), two = member({2, 0});
  mark_ended({1, 0});
  auto formed = std::async(std::launch::async, [&] { zero->form_next(); });
  two->form_next();
  formed.get();
  EXPECT_FALSE(zero->joiner_waiting());

  auto replacement = member({1, 1});
  EXPECT_TRUE(replacement->joiner());
  auto admitted = std::async(std::launch::async, [&] { return replacement->wait_for_admission(); });
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!zero->joiner_waiting() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(zero->joiner_waiting());
  EXPECT_FALSE(two->joiner_waiting());  // rank 0 watches; the step's agreement tells the others
  EXPECT_EQ(admitted.wait_for(200ms), std::future_status::timeout);

  formed = std::async(std::launch::async, [&] { zero->form_next(); });
  two->form_next();
  formed.get();
  ASSERT_TRUE(admitted.get());
  EXPECT_EQ(replacement->generation(), 2);
  EXPECT_EQ(ids(replacement->members()), (std::vector<int>{0, 2, 1}));
  EXPECT_EQ(replacement->rank(), 2);
  EXPECT_EQ(zero->members(), replacement->members());
  EXPECT_FALSE(zero->joiner_waiting());
}

TEST_F(MembershipTest, AReplacementThatEndsBeforeItIsAdmittedIsLeftOut) {
  auto zero = member({0, 0}), two = member({2, 0});
  auto replacement = member({1, 1});
  std::thread waiting([&] {
    try {
      replacement->wait_for_admission();
    } catch (const TimeoutError&) {
    }
  });
  mark_ended({1, 0});
  while (!zero->joiner_waiting()) std::this_thread::sleep_for(10ms);
  mark_ended({1, 1});  // the replacement's launcher saw it end
  auto formed = std::async(std::launch::async, [&] { zero->form_next(); });
  two->form_next();
  formed.get();
  EXPECT_EQ(ids(zero->members()), (std::vector<int>{0, 2}));
  zero->finish();
  waiting.join();
}

TEST_F(MembershipTest, AReplacementEndsWhenTheOthersFinishedFirst) {
  auto zero = member({0, 0});
  zero->finish();
  EXPECT_FALSE(member({1, 1})->wait_for_admission());
}

TEST_F(MembershipTest, MembersThatNeitherGoOnNorEndAreNamedAfterTheTimeout) {
  auto zero = member({0, 0}, 500ms);
  try {
    zero->form_next();
    FAIL() << "formed a generation without evidence about workers 1 and 2";
  } catch (const TimeoutError& e) {
    EXPECT_EQ(std::string(e.what()),
              "lockstep: worker 0: workers 1, 2 neither went on to generation 1 nor ended within 0.5 s "
              "(LOCKSTEP_TIMEOUT); does its launcher watch its heartbeats?");
  }
}

}  // namespace
}  // namespace lockstep::elastic
