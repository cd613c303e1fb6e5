/* replay.h - running a fuzz target on files (see replay.c). */
#ifndef SEROW_FUZZ_REPLAY_H
#define SEROW_FUZZ_REPLAY_H

#include <stddef.h>
#include <stdint.h>

/* Runs target (one of targets.h, named name in the count printed) on each
 * file of paths, files or directories.  The number of inputs replayed, or
 * -1 when a path could not be read (a failing input aborts). */
int replay_paths(const char *name, int (*target)(const uint8_t *, size_t), int count, char **paths);

#endif
