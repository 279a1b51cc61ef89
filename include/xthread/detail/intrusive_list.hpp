// SPDX-License-Identifier: MIT
// xthread/detail/intrusive_list.hpp — the doubly linked list through two pointer members of its nodes
// (the wait graph's blocked threads): O(1) insert at the head and unlink of any node, no allocation.
#pragma once

namespace xthread::detail {

/// A list of `Node`s linked through `Node::*Prev` and `Node::*Next`, whose head pointer the owner keeps.
/// Thread rule: none of its own; the owner guards the head and the nodes' links (one lock for all).
template <class Node, Node* Node::* Prev, Node* Node::* Next>
struct IntrusiveList {
  /// Makes `node` (not in a list) the first node of the list at `head`.
  static void push_front(Node*& head, Node& node) noexcept {
    node.*Prev = nullptr;
    node.*Next = head;
    if (head != nullptr) head->*Prev = &node;
    head = &node;
  }

  /// Takes `node`, which is in the list at `head`, out of it; its links are null afterwards.
  static void unlink(Node*& head, Node& node) noexcept {
    if (node.*Prev != nullptr) {
      node.*Prev->*Next = node.*Next;
    } else {
      head = node.*Next;
    }
    if (node.*Next != nullptr) node.*Next->*Prev = node.*Prev;
    node.*Prev = node.*Next = nullptr;
  }
};

}  // namespace xthread::detail
