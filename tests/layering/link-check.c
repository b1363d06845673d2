/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A link check: meson.build links one layer's whole static library into
 * this program with only the libraries ARCHITECTURE.md lets that layer
 * use.  A call into a forbidden layer leaves a symbol unresolved and fails
 * the build; the program itself does nothing and is never run.
 */
int main(void) {
	return 0;
}
