// MPI's world as a Communicator (OpenMPI; any MPI-3 library). Built into the `ctgrad_mpi` library
// when CMake finds MPI; the `ctgrad` command uses it when an MPI launcher started it.
#pragma once
#include <memory>

#include <ctgrad/training/distributed.hpp>

namespace ctgrad::training {

// Initialises MPI (thread level serialized) and finalises it when the communicator is destroyed.
// A collective that waits more than `timeout_seconds` prints which one and ends this process,
// and the launcher then ends the others: a dead or hung rank never leaves the job hanging.
std::unique_ptr<Communicator> mpi_world(double timeout_seconds);

}  // namespace ctgrad::training
