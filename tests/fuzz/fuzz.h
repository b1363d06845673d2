/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * Every fuzz target defines LLVMFuzzerTestOneInput().  Built with
 * -Dfuzz=libfuzzer it links against libFuzzer; otherwise fuzz-main.c supplies
 * a main() that replays the checked-in corpus plus a fixed number of
 * deterministic mutations of it, so plain `meson test` exercises the parser.
 */

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
