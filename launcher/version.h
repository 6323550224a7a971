// What ddp_train is, for --version and for the ranks to compare.
#pragma once

#include <string>

namespace ddp::launcher {

// "0.1.0 (git 2505929a1c)": the project version and the commit the binary was
// built from. One of the consistency items: a node running another build
// stops the job at start-up, named, instead of training with other code.
std::string ddpVersion();

// The --version text: ddp_train's version, whether the build has CUDA, and the
// versions of the MPI (and CUDA runtime and NCCL) libraries it runs on.
// Callable before MPI starts; needs no GPU.
std::string versionText();

}  // namespace ddp::launcher
