// SPDX-License-Identifier: MIT
// wire_stream.h: the frames pushed to subscribers (docs/streams.md). A step's record is
// encoded once per encoding into a shared frame, Envelope{sensor_data: {...}}; each
// subscriber's frame is a short prefix of its own, Envelope field `sequence`, then the shared
// bytes (fields of a message may come in any order, so a reader sees one Envelope).
#ifndef SENSIM_NET_WIRE_STREAM_H_
#define SENSIM_NET_WIRE_STREAM_H_

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "codec/codec.h"
#include "net/shared_buf.h"
#include "sensor/sensor.h"

// Longest prefix wire_stream_prefix writes.
#define WIRE_STREAM_PREFIX_MAX 11u

// Encode rec (its point cloud with p) covering (start_time, rec->time] into a new shared
// frame (*out, one reference). Thread: any (a worker).
int wire_stream_encode(const sensor_record_t* rec, double start_time, const codec_params_t* p,
                       shared_buf_t** out, err_msg_t* msg) CHECKRET;

// The last frame of a subscription whose sensor was removed: SensorData{sensor_id,
// end_of_stream: true}.
int wire_stream_encode_end(uint32_t sensor_id, shared_buf_t** out) CHECKRET;

// Write the prefix carrying `sequence` into buf; returns its length.
size_t wire_stream_prefix(uint64_t sequence, uint8_t buf[WIRE_STREAM_PREFIX_MAX]);

#endif  // SENSIM_NET_WIRE_STREAM_H_
