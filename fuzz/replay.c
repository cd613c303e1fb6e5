/*
 * replay.c - runs a fuzz target on files, without libFuzzer: for the
 * regression corpus in the test suite (t/parser/guard_page.c,
 * t/http/websocket_frame.c and t/http/websocket_events.c link it) and for
 * reproducing a crash with gcc alone.  A directory is replayed file by
 * file (dot files skipped); a failing input abort()s with its name printed.
 */
#include "replay.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static int (*target)(const uint8_t *, size_t);
static int replayed;

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        return 1;
    }
    size_t cap = 4096, len = 0;
    uint8_t *data = malloc(cap);
    size_t got;
    while (data && (got = fread(data + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap)
            data = realloc(data, cap *= 2);
    }
    fclose(f);
    if (data == NULL)
        return 1;
    fprintf(stderr, "replaying %s\n", path); /* the culprit, if the target aborts */
    target(data, len);
    free(data);
    replayed++;
    return 0;
}

static int replay_path(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        perror(path);
        return 1;
    }
    if (!S_ISDIR(st.st_mode))
        return replay_file(path);
    DIR *dir = opendir(path);
    if (dir == NULL) {
        perror(path);
        return 1;
    }
    int failed = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", path, e->d_name);
        failed |= replay_path(full);
    }
    closedir(dir);
    return failed;
}

int replay_paths(const char *name, int (*run)(const uint8_t *, size_t), int count, char **paths)
{
    target = run;
    replayed = 0;
    int failed = 0;
    for (int i = 0; i < count; i++)
        failed |= replay_path(paths[i]);
    printf("# replayed %d inputs through the %s target\n", replayed, name);
    return failed ? -1 : replayed;
}
