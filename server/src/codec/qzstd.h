// SPDX-License-Identifier: MIT
// qzstd.h: CODEC_QZSTD, the quantized range-image encoding (codec.h; byte format in
// docs/streams.md). Private to codec/.
#ifndef SENSIM_CODEC_QZSTD_H_
#define SENSIM_CODEC_QZSTD_H_

#include "codec/codec.h"

size_t qzstd_max_size(const codec_cloud_t* c);

int qzstd_encode(const codec_params_t* p, const codec_cloud_t* c, uint8_t* out, size_t cap,
                 size_t* out_len, double* max_error, err_msg_t* msg) CHECKRET;

int qzstd_decode(const uint8_t* in, size_t len, uint32_t count, uint32_t point_step,
                 uint8_t* out, err_msg_t* msg) CHECKRET;

#endif  // SENSIM_CODEC_QZSTD_H_
