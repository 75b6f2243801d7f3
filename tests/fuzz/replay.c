// SPDX-License-Identifier: MIT
// replay.c: a driver for the fuzz targets without libFuzzer, so that any compiler builds them
// and the normal suite replays their seed corpora and regression inputs (tests/fuzz/regress)
// under the sanitizers of its build. Arguments are files or directories (every regular file
// in them whose name does not start with a dot, in name order); it fails when they hold no
// input at all, so that a corpus that went missing does not pass silently. A broken
// invariant aborts, as under libFuzzer.
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

__attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);


static int run_file(const char* path) {
  FILE* f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: cannot open %s\n", path);
    return -1;
  }
  long len = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
  rewind(f);

  // a buffer of exactly the input's size, as libFuzzer hands it over, so that ASan sees a read
  // past its end
  uint8_t* data = len >= 0 ? malloc(len ? (size_t)len : 1) : NULL;
  int ok = data && fread(data, 1, (size_t)len, f) == (size_t)len;
  fclose(f);
  if (!ok) {
    fprintf(stderr, "replay: cannot read %s\n", path);
    free(data);
    return -1;
  }
  LLVMFuzzerTestOneInput(data, (size_t)len);
  free(data);
  return 0;
}


static int by_name(const struct dirent** a, const struct dirent** b) {
  return strcmp((*a)->d_name, (*b)->d_name);
}


// Run every input under path; returns their number, or -1 on an error.
static long run_path(const char* path) {
  struct stat st;
  if (stat(path, &st) != 0) {
    fprintf(stderr, "replay: %s does not exist\n", path);
    return -1;
  }
  if (!S_ISDIR(st.st_mode)) {
    return run_file(path) == 0 ? 1 : -1;
  }
  struct dirent** names;
  int n = scandir(path, &names, NULL, by_name);
  if (n < 0) {
    fprintf(stderr, "replay: cannot list %s\n", path);
    return -1;
  }
  long count = 0;
  for (int i = 0; i < n; i++) {
    char file[4096];
    snprintf(file, sizeof(file), "%s/%s", path, names[i]->d_name);
    struct stat fs;
    if (names[i]->d_name[0] != '.' && stat(file, &fs) == 0 && S_ISREG(fs.st_mode)) {
      if (run_file(file) != 0) {
        count = -1;
      } else if (count >= 0) {
        count++;
      }
    }
    free(names[i]);
  }
  free(names);
  return count;
}


int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
    return 2;
  }
  if (LLVMFuzzerInitialize) {
    LLVMFuzzerInitialize(&argc, &argv);
  }
  long total = 0;
  for (int i = 1; i < argc; i++) {
    long n = run_path(argv[i]);
    if (n < 0) {
      fprintf(stderr, "replay: %s: failed\n", argv[i]);
      return 1;
    }
    printf("replay: %s: %ld inputs\n", argv[i], n);
    total += n;
  }
  if (total == 0) {
    fprintf(stderr, "replay: no inputs\n");
    return 1;
  }
  return 0;
}
