// SPDX-License-Identifier: MIT
// daemon.c: placeholder, replaced by the daemon implementation.
