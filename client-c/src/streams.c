// SPDX-License-Identifier: MIT
// streams.c: subscriptions and the records pushed to them (Envelope.id = 0), kept in the
// handle's bounded queue by whatever call received them, handed out one at a time as views.
#include <string.h>

#include "internal.h"

// Subscribe.precision's range in the daemon (m)
#define SUB_MIN_PRECISION 1e-6
#define SUB_MAX_PRECISION 1.0
// Subscribe.fields: at most this many names (the daemon's bound)
#define SUB_MAX_FIELDS 16


void sensim_subscription_init_sized(sensim_subscription_t* sub, size_t size) {
  SENSIM_INIT_SIZED(sensim_subscription_t, sub, size, {
    d_.encoding = SENSIM_ENCODING_RAW;
    d_.precision = 0.001;
    d_.level = 1;
  });
}


sensim_status_t sensim_subscribe(sensim_client_t* cli, const sensim_subscription_t* sub) {
  if (!cli) {
    return SENSIM_INVALID_ARGUMENT;
  }
  sensim_subscription_t s;
  sensim_subscription_init(&s);
  sensim_status_t st = sensim_sized_copy(cli, &s, sizeof(s), sub, "sub",
                                         "sensim_subscription_init");
  if (st != SENSIM_OK ||
      (st = sensim_need(cli, s.fields, s.nfields, "sub.fields", "nfields")) != SENSIM_OK) {
    return st;
  }
  // the count first: no more of the caller's array is read than the daemon takes
  if (s.nfields > SUB_MAX_FIELDS) {
    return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "sub.nfields = %u: at most %d names",
                           s.nfields, SUB_MAX_FIELDS);
  }
  for (uint32_t i = 0; i < s.nfields; i++) {
    if (s.fields[i] == NULL) {
      return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "sub.fields[%u]: NULL", i);
    }
  }
  if ((unsigned)s.encoding > SENSIM_ENCODING_QUANTIZED_ZSTD) {
    return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT,
                           "sub.encoding = %d is unknown (RAW 0, ZSTD 1, QUANTIZED_ZSTD 2)",
                           (int)s.encoding);
  }
  if (s.level < 0 || s.level > 19) {
    return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "sub.level = %d must be in [1, 19] "
                           "(0: 1)", (int)s.level);
  }
  // the daemon's range, whatever the encoding (the field is always sent); NaN fails it too
  if (!(s.precision >= SUB_MIN_PRECISION && s.precision <= SUB_MAX_PRECISION)) {
    return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "sub.precision = %g must be in [%g, %g] m",
                           s.precision, SUB_MIN_PRECISION, SUB_MAX_PRECISION);
  }
  sensim_v1_Subscribe* w = &sensim_begin(cli, sensim_v1_Envelope_subscribe_tag)->body.subscribe;
  w->has_sensor_id = w->has_encoding = w->has_precision = w->has_level = true;
  w->sensor_id = s.sensor_id;
  w->encoding = (sensim_v1_Encoding)s.encoding;
  w->precision = s.precision;
  w->level = s.level;
  sensim_strings_t fields = {s.fields, s.nfields};
  w->fields.funcs.encode = sensim_wire_encode_strings;
  w->fields.arg = &fields;
  return sensim_call_status(cli);
}


sensim_status_t sensim_unsubscribe(sensim_client_t* cli, uint32_t sensor_id) {
  if (!cli) {
    return SENSIM_INVALID_ARGUMENT;
  }
  sensim_v1_Unsubscribe* w =
      &sensim_begin(cli, sensim_v1_Envelope_unsubscribe_tag)->body.unsubscribe;
  w->has_sensor_id = true;
  w->sensor_id = sensor_id;
  return sensim_call_status(cli);
}


sensim_status_t sensim_next_sensor_data(sensim_client_t* cli, int timeout_ms,
                                        const sensim_sensor_data_t** out) {
  if (!cli) {
    return SENSIM_INVALID_ARGUMENT;
  }
  if (!out) {
    return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "out: NULL");
  }
  *out = NULL;
  sensim_views_reset(cli);

  // what already arrived first; then the socket until the deadline
  int64_t deadline = sensim_deadline(cli, timeout_ms);
  while (cli->pushed.head == NULL) {
    sensim_status_t st = sensim_transport_pump(cli, deadline);
    if (st == SENSIM_EAGAIN) {
      return sensim_cli_fail(cli, SENSIM_EAGAIN, "no sensor data within %d ms",
                             timeout_ms < 0 ? cli->timeout_ms : timeout_ms);
    }
    if (st != SENSIM_OK) {
      // named as every call on a closed handle names it (a failed connect left no reason)
      return sensim_cli_fail(cli, st, "connection is closed%s%s",
                             cli->closed_reason[0] ? ": " : "", cli->closed_reason);
    }
  }
  sensim_frame_t* f = cli->pushed.head;
  cli->pushed.head = f->next;
  if (!cli->pushed.head) {
    cli->pushed.tail = NULL;
  }
  f->next = NULL;
  cli->pushed_frames--;
  cli->pushed_bytes -= f->len;

  // the frame stays with the views
  if (cli->held.tail) {
    cli->held.tail->next = f;
  } else {
    cli->held.head = f;
  }
  cli->held.tail = f;
  sensim_sensor_data_t* d = sensim_arena_alloc(cli, sizeof(*d));
  if (!d) {
    return sensim_cli_fail(cli, SENSIM_ENOMEM, "out of memory for sensor data");
  }
  uint64_t sequence = 0;
  sensim_status_t st = sensim_data_from_frame(cli, f, d, &sequence);
  if (st != SENSIM_OK) {
    return st;
  }
  d->sequence = sequence;
  *out = d;
  return SENSIM_OK;
}
