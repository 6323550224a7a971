// Heartbeats of long local work.
//
// Note [Heartbeats of local work]
// The watchdog ends a job whose rank has made no progress for --timeout plus
// a grace (Note [Where a stuck rank is] in comm/watchdog.h): every rank stuck
// outside collectives, where no collective timeout fires. Progress is a
// collective, a new step or evaluation batch, or a heartbeat: work that runs
// long on one rank without communicating calls heartbeat() as it goes, so
// that a slow but moving load is not taken for a hang. It is called per
// MiB or so by what may take longer than a few seconds on a large model, a
// large data set or a slow file system: reading and generating the data,
// initialising the weights, fingerprinting the data for the ranks'
// comparison, reading and writing safetensors files (weights, checkpoints).
// So the check covers start-up too, where every rank loads its data alone:
// a job whose every rank blocks on a hung network file system ends with a
// report instead of burning its allocation.
#pragma once

namespace ddp {

// Records that local work moved on. Lock-free and cheap (a clock read and an
// atomic store): any thread, as often as every MiB.
void heartbeat();

// Seconds since the last heartbeat() of any thread; infinity before the
// first. Any thread.
double secondsSinceHeartbeat();

}  // namespace ddp
