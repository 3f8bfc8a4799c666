//===- PipeOrder.h - The order in which ranks open their pipes --*- C++ -*-===//
//
// A device communicator opens a pipe (two two-rank communicators) for each
// pair of ranks that exchange pipeline messages (Communicator::openPipes),
// each pair collective over its two ranks. Every rank must open its pairs
// in an order common to all ranks, or two could each wait for the other in
// a different pair. In (low, high) order a pipeline's pairs (0, 1), (1, 2),
// ... connect one after another: rank k + 1 waits at (k, k + 1) until rank
// k is done with (k - 1, k), p - 1 connections end to end. Here the pairs
// of all ranks are coloured into rounds in which no rank is in two pairs
// (greedily, in (low, high) order), and every rank opens its pairs in
// (round, low, high) order: still one order for all, and the pairs of a
// round connect at the same time (a pipeline's chain in two rounds, its
// interleaved ring in three).
//
//===----------------------------------------------------------------------===//

#ifndef SMPRT_COMM_PIPEORDER_H
#define SMPRT_COMM_PIPEORDER_H

#include <vector>

namespace smprt {

struct PipePair {
  int low = 0, high = 0;
  int round = 0;
};

/// Every pair that some rank names (`peersOfRank[r]`: the ranks rank r
/// exchanges messages with; a pair named by either of its ranks counts),
/// with its round, in (round, low, high) order. Peers out of range or equal
/// to their rank are ignored (the communicator refuses them before).
std::vector<PipePair>
pipeRounds(const std::vector<std::vector<int>> &peersOfRank);

/// The pairs of `rank` in the order it opens them: pipeRounds' order.
std::vector<PipePair> pipeOrderOf(const std::vector<PipePair> &rounds,
                                  int rank);

} // namespace smprt

#endif // SMPRT_COMM_PIPEORDER_H
