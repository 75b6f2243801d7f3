// SPDX-License-Identifier: MIT
// fuzz_check.h: the oracle of a point-cloud encoding, shared by fuzz_codec (clouds made of
// hostile bytes) and fuzz_request (the clouds the sensors produced): encode with the daemon's
// encoder, decode with the daemon's decoder and with the C client's independent one, and check
// what docs/streams.md promises.
#ifndef SENSIM_TESTS_FUZZ_FUZZ_CHECK_H_
#define SENSIM_TESTS_FUZZ_FUZZ_CHECK_H_

#include "codec/codec.h"

// Encode c as enc (precision for QZSTD, zstd level), decode it with both decoders, and abort
// unless they give the same bytes and those are the cloud's: bit for bit for RAW and ZSTD, and
// for QZSTD every byte but positions, non-finite positions bit for bit, and every other
// position within the max_error the encoder reported, itself within 0.62 precision +
// 1.1e-7 r_max. Refusals are allowed only for a precision or level out of range.
void fuzz_cloud_check(const codec_cloud_t* c, codec_encoding_t enc, double precision,
                      int level);

// Decode `len` bytes as enc into count points of step bytes with both decoders; abort unless
// they agree: whatever the daemon's decoder accepts, the client's decodes to the same bytes,
// and for QZSTD they also refuse the same inputs. Returns 1 when the daemon's decoder
// accepted the bytes.
int fuzz_decode_both(codec_encoding_t enc, const uint8_t* in, size_t len, uint32_t count,
                     uint32_t step);

#endif  // SENSIM_TESTS_FUZZ_FUZZ_CHECK_H_
