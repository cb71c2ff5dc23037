/* SPDX-License-Identifier: MIT */
/* textfile.h: a whole file read into memory, NUL-terminated, for the commands that take
 * files (kernel-set configs, shape matrices, bench CSVs). */
#ifndef FMHA_CLI_TEXTFILE_H
#define FMHA_CLI_TEXTFILE_H

/* malloc'd contents of path (free with free), or NULL when unreadable or out of memory. */
char *textfile_read(const char *path);

#endif /* FMHA_CLI_TEXTFILE_H */
