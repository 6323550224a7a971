// World: this process's place in the job.
//
// Owns MPI's lifetime (MPI_Init_thread in the constructor, MPI_Finalize in the
// destructor) and describes the job: global rank and size, the node this rank
// runs on (ranks that share memory, found with MPI_Comm_split_type), and which
// launcher started it. Created once, first thing in main, on the main thread;
// every other component receives it by reference.
//
// MPI_THREAD_MULTIPLE is required: the MPI communicator runs its collectives
// on a communication thread while the main thread computes (see
// comm/mpi/mpi_communicator.h).
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

namespace ddp {

// One node of the job: its host name and the global ranks on it (ascending).
struct NodeLayout {
  std::string host;
  std::vector<int> ranks;
};

// Which program started this process, as read from the environment.
enum class Launcher { kSingleton, kMpirun, kSrun };
const char* launcherName(Launcher launcher);

class World {
 public:
  // Initialises MPI (unless already initialised, e.g. by a test main) and reads
  // the job layout. Collective over MPI_COMM_WORLD. Throws CommError.
  World();
  // Finalises MPI if this object initialised it. Never throws.
  ~World();

  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Rank among the processes on this node, and how many there are.
  int localRank() const { return localRank_; }
  int localSize() const { return localSize_; }
  // Index of this node (0..nodeCount-1, ordered by lowest global rank) and node count.
  int nodeIndex() const { return nodeIndex_; }
  int nodeCount() const { return nodeCount_; }
  const std::string& hostname() const { return hostname_; }
  // Every node, in nodeIndex() order. The same on every rank.
  const std::vector<NodeLayout>& nodes() const { return nodes_; }
  Launcher launcher() const { return launcher_; }

  // The world communicator (with MPI_ERRORS_RETURN set). Owned by MPI.
  MPI_Comm comm() const { return MPI_COMM_WORLD; }

  // Ends every process of the job with `code`. For errors that one rank cannot
  // report collectively (the others may be blocked in a collective).
  [[noreturn]] void abort(int code) const;

 private:
  bool ownsMpi_ = false;
  int rank_ = 0;
  int size_ = 1;
  int localRank_ = 0;
  int localSize_ = 1;
  int nodeIndex_ = 0;
  int nodeCount_ = 1;
  std::string hostname_;
  std::vector<NodeLayout> nodes_;
  Launcher launcher_ = Launcher::kSingleton;
};

// The rank this process will have, read from the launcher's environment before
// MPI is initialised (OMPI_COMM_WORLD_RANK, PMIX_RANK, SLURM_PROCID); 0 when
// started alone. Lets the launcher report usage errors on rank 0 only without
// starting MPI.
int rankFromEnvironment();

// The same for the rank's place on its node (OMPI_COMM_WORLD_LOCAL_RANK,
// PMIX_LOCAL_RANK, SLURM_LOCALID): a usage error that comes from the node
// (its files) is reported once per node, by its first rank.
int localRankFromEnvironment();

// This machine's host name ("unknown-host" if it has none).
std::string thisHostname();

// Rank r's host name at [r].
std::vector<std::string> hostOfEachRank(const World& world);

// "a: ranks 0-1; b: ranks 2-3" (consecutive ranks shown as ranges).
std::string describeNodes(const std::vector<NodeLayout>& nodes);

}  // namespace ddp
