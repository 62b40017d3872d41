#pragma once

#include <string>

// The timeline's file format: its tracks, the names of lockstep's events and the keys of
// their args. lockstep's code writes them, `lockstep timeline` reads them back, both through
// these names and never by literals. Every file records kFormatVersion; a change to a name,
// a key or a meaning raises it.
namespace lockstep::timeline::format {

constexpr int kFormatVersion = 2;  // 2: spans of device work (key::kDevice)

/// The rows of a rank's process in the trace (its "tid").
enum class Track : int { training = 1, buckets = 2, collectives = 3, marks = 4 };

namespace event {
// The training loop's spans (Track::training); a step holds the others of its iteration.
inline constexpr char kStep[] = "step";
inline constexpr char kDataWait[] = "data wait";
inline constexpr char kForward[] = "forward";
inline constexpr char kBackward[] = "backward";
// Inside backward: DDP waiting for its buckets. On CUDA also a device span on Track::buckets,
// the device's wait (the host's only queues it).
inline constexpr char kGradientWait[] = "gradient wait";
inline constexpr char kOptimizerStep[] = "optimizer step";
inline constexpr char kCheckpoint[] = "checkpoint";
inline constexpr char kValidation[] = "validation";
// Marks (Track::marks).
inline constexpr char kMismatch[] = "mismatch";
inline constexpr char kCollectiveFailed[] = "collective failed";
inline constexpr char kRestart[] = "restart";
inline constexpr char kRestartAfterMissedHeartbeats[] = "restart: heartbeats missed";
inline constexpr char kMembership[] = "membership";  // live recovery's new generation
// The metadata event that carries kFormatVersion.
inline constexpr char kFormat[] = "lockstep_timeline";
/// A DDP bucket's span (Track::buckets), from ready to reduced. Collectives
/// (Track::collectives) are named by their kind ("all_reduce").
inline std::string bucket(size_t index) { return "bucket " + std::to_string(index); }
}  // namespace event

namespace key {
// A step's: its number at "B", the collectives and buckets it called at "E".
inline constexpr char kStep[] = "step";
inline constexpr char kFirstCollective[] = "first_collective";
inline constexpr char kCollectives[] = "collectives";
inline constexpr char kBuckets[] = "buckets";
// A collective's: which call of which group, over what, and how long it queued before it ran.
inline constexpr char kSeq[] = "seq";
inline constexpr char kGroup[] = "group";
inline constexpr char kTransport[] = "transport";
inline constexpr char kDtype[] = "dtype";
inline constexpr char kBytes[] = "bytes";
inline constexpr char kQueuedUs[] = "queued_us";
// A span of work on a device stream (CUDA), timed by the device: which device ("cuda:0").
// Its queued_us is from the host's call to the device's start.
inline constexpr char kDevice[] = "device";
// A bucket's.
inline constexpr char kBucket[] = "bucket";
inline constexpr char kParameters[] = "parameters";
// A mark's.
inline constexpr char kWhat[] = "what";
inline constexpr char kAttempt[] = "attempt";
inline constexpr char kWhy[] = "why";
inline constexpr char kGeneration[] = "generation";
inline constexpr char kWorkers[] = "workers";
inline constexpr char kRegroupSeconds[] = "regroup_s";
inline constexpr char kHealSeconds[] = "heal_s";
// The metadata's.
inline constexpr char kClockOffsetUs[] = "clock_offset_us";
inline constexpr char kVersion[] = "version";
}  // namespace key

}  // namespace lockstep::timeline::format
