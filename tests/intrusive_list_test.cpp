// SPDX-License-Identifier: MIT
// detail::IntrusiveList: insert at the head and unlink of the first, a middle, the last and the only
// node keep both directions of the list consistent.
#include <gtest/gtest.h>

#include <vector>

#include "xthread/detail/intrusive_list.hpp"

namespace {

struct Node {
  int value = 0;
  Node* prev = nullptr;
  Node* next = nullptr;
};
using List = xthread::detail::IntrusiveList<Node, &Node::prev, &Node::next>;

/// The values from the head forwards, after checking that every back link mirrors a forward one.
std::vector<int> walk(Node* head) {
  std::vector<int> values;
  const Node* before = nullptr;
  for (Node* node = head; node != nullptr; node = node->next) {
    EXPECT_EQ(node->prev, before) << "at value " << node->value;
    values.push_back(node->value);
    before = node;
  }
  return values;
}

}  // namespace

TEST(IntrusiveList, PushFrontPutsTheNewestFirst) {
  Node a{1}, b{2}, c{3};
  Node* head = nullptr;
  List::push_front(head, a);
  List::push_front(head, b);
  List::push_front(head, c);
  EXPECT_EQ(walk(head), (std::vector<int>{3, 2, 1}));
}

TEST(IntrusiveList, UnlinkOfTheFirstAMiddleAndTheLastNodeKeepsBothDirections) {
  Node nodes[5];
  Node* head = nullptr;
  for (int i = 0; i < 5; ++i) {
    nodes[i].value = i;
    List::push_front(head, nodes[i]);
  }  // 4 3 2 1 0
  List::unlink(head, nodes[2]);  // middle
  EXPECT_EQ(walk(head), (std::vector<int>{4, 3, 1, 0}));
  List::unlink(head, nodes[4]);  // first
  EXPECT_EQ(walk(head), (std::vector<int>{3, 1, 0}));
  List::unlink(head, nodes[0]);  // last
  EXPECT_EQ(walk(head), (std::vector<int>{3, 1}));
  for (const int unlinked : {0, 2, 4}) {
    EXPECT_EQ(nodes[unlinked].prev, nullptr);
    EXPECT_EQ(nodes[unlinked].next, nullptr);
  }
}

TEST(IntrusiveList, UnlinkOfTheOnlyNodeEmptiesTheListAndTheNodeCanBeLinkedAgain) {
  Node only{7};
  Node* head = nullptr;
  List::push_front(head, only);
  List::unlink(head, only);
  EXPECT_EQ(head, nullptr);
  List::push_front(head, only);
  EXPECT_EQ(walk(head), (std::vector<int>{7}));
}
