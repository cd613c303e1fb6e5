/* replay.h - running a fuzz target on files (see replay.c). */
#ifndef SEROW_FUZZ_REPLAY_H
#define SEROW_FUZZ_REPLAY_H

/* kind: "request", "chunked", "grip", "holder_message" or "tls_record"; paths: files or directories.  0 when all
 * could be read (a failing input aborts). */
int replay_paths(const char *kind, int count, char **paths);

#endif
