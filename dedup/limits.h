/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * Hard limits shared by the chunker and the chunk frame.  They are part of the
 * on-disk format (docs/FORMAT.md): a frame claiming a chunk outside these
 * bounds is corrupt, whoever wrote it.
 */

/* Smallest chunk the content-defined chunker cuts: one gear-hash window. */
#define DEDUP_CHUNK_SIZE_LIMIT_MIN 64u
/* Largest chunk anything in dedup/ produces or accepts (4 MiB). */
#define DEDUP_CHUNK_SIZE_LIMIT_MAX (4u << 20)
