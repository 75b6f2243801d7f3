// SPDX-License-Identifier: MIT
// main.c: placeholder, replaced by the daemon implementation.
int main(void) {
  return 0;
}
