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

#define WIRE_STREAM_MAX_FIELDS 16
#define WIRE_STREAM_FIELD_NAME 32   // bytes of a field name, NUL included

// What a subscription asks for: the encoding, and the point fields it wants (in this order;
// none: every field of the cloud as it is).
typedef struct wire_stream_params {
  codec_params_t codec;
  uint32_t nfield;
  char fields[WIRE_STREAM_MAX_FIELDS][WIRE_STREAM_FIELD_NAME];
} wire_stream_params_t;

// 1 when a and b give the same frames.
int wire_stream_params_equal(const wire_stream_params_t* a, const wire_stream_params_t* b);

// Longest prefix wire_stream_prefix writes.
#define WIRE_STREAM_PREFIX_MAX 11u

// Encode rec covering (start_time, rec->time] into a new shared frame (*out, one reference):
// a point cloud reduced to p's fields (those it has, packed in the order asked, each aligned
// to its size) and encoded as p says. Thread: any (a worker).
int wire_stream_encode(const sensor_record_t* rec, double start_time,
                       const wire_stream_params_t* p, shared_buf_t** out,
                       err_msg_t* msg) CHECKRET;

// The last frame of a subscription whose sensor was removed: SensorData{sensor_id,
// end_of_stream: true}.
int wire_stream_encode_end(uint32_t sensor_id, shared_buf_t** out) CHECKRET;

// Write the prefix carrying `sequence` into buf; returns its length.
size_t wire_stream_prefix(uint64_t sequence, uint8_t buf[WIRE_STREAM_PREFIX_MAX]);

#endif  // SENSIM_NET_WIRE_STREAM_H_
