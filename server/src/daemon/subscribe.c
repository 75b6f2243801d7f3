// SPDX-License-Identifier: MIT
// subscribe.c: Subscribe and Unsubscribe requests: their fields checked, then a job on the
// environment's queue that adds the demand (daemon/streams.h) in order with the requests
// before it, and the subscription made or ended on the loop thread.
#include <stdio.h>
#include <string.h>

#include "base/mem.h"
#include "codec/codec.h"
#include "daemon/daemon_impl.h"

// Subscribe runs on the environment's queue, in order with the requests before it: the sensor
// must exist there, and the demand is added before any later step runs.
typedef struct sub_job {
  exec_job_t base;
  daemon_t* d;
  session_t* s;              // retained
  outbox_slot_t* slot;
  registry_entry_t* entry;   // referenced
  uint64_t id;
  uint32_t sensor_id;
  wire_stream_params_t p;
  int unsubscribe;           // an Unsubscribe: queued only to keep its order
  int code;                  // 0, ERR_NOTFOUND or ERR_NOMEM
  uint64_t since;            // the first step whose records the subscription gets
  streams_lane_t* lane;      // where the demand was added (sj->code == 0)
} sub_job_t;


static void sub_run(exec_job_t* j) {
  sub_job_t* sj = (sub_job_t*)j;
  registry_entry_t* e = sj->entry;
  if (sj->unsubscribe) {
    return;
  }
  if (!e->env || env_sensor_kind(e->env, sj->sensor_id) == 0) {
    sj->code = ERR_NOTFOUND;
    return;
  }
  sj->code = streams_demand_add(sj->d->streams, e, sj->sensor_id, &sj->p, &sj->lane,
                                &sj->since);
}


static void sub_done(exec_job_t* j, int cancelled) {
  sub_job_t* sj = (sub_job_t*)j;
  daemon_t* d = sj->d;
  client_t* c = session_data(sj->s);
  int code = cancelled ? ERR_STATE : sj->code;
  uint8_t* out = NULL;
  size_t len = 0;
  char text[160] = "";
  if (sj->unsubscribe) {
    if (code == 0 && c) {
      code = streams_unsubscribe(d->streams, sj->s, sj->sensor_id);
    }
    if (code == 0) {
      snprintf(text, sizeof(text), "unsubscribed from sensor %u", sj->sensor_id);
    } else if (code == ERR_NOTFOUND) {
      snprintf(text, sizeof(text), "unsubscribe.sensor_id = %u: this connection is not "
               "subscribed to it", sj->sensor_id);
    }
  } else if (code == 0 && (!c || session_is_closing(sj->s))) {
    streams_demand_remove(d->streams, sj->lane);
  } else if (code == 0) {
    code = streams_subscribe(d->streams, sj->s, sj->lane, sj->entry->name, sj->since);
    if (code != 0) {
      streams_demand_remove(d->streams, sj->lane);
    }
  }
  if (sj->unsubscribe) {
    // the text is set
  } else if (code == ERR_NOTFOUND) {
    snprintf(text, sizeof(text), "subscribe.sensor_id = %u: no such sensor", sj->sensor_id);
  } else if (code == ERR_EXISTS) {
    snprintf(text, sizeof(text), "subscribe.sensor_id = %u: this connection is subscribed "
             "already (unsubscribe first)", sj->sensor_id);
  }
  if (code != 0 && !text[0]) {
    snprintf(text, sizeof(text), "%s: %s", sj->unsubscribe ? "unsubscribe" : "subscribe",
             err_str(code));
  }
  if (c) {
    d->counters.requests_failed += code != 0;
    if (wire_encode_status(sj->id, code, text, &out, &len) != 0) {
      out = NULL;
    }
  }
  outbox_fill(sj->slot, out, len);
  if (c) {
    reply_moved(d, c);
  }
  registry_release(sj->entry);
  session_release(sj->s);
  mem_free(sj);
}


static void submit_sub_job(daemon_t* d, client_t* c, uint64_t id, uint32_t sensor_id,
                           const wire_stream_params_t* p, int unsubscribe);


void subscribe_add(daemon_t* d, client_t* c, wire_request_t* req) {
  uint64_t id = wire_id(req);
  wire_subscribe_t w;
  wire_get_subscribe(req, &w);
  if (w.sensor_id == 0) {   // names no sensor: the caller's mistake, as id 0 everywhere
    reply_status(d, c->s, id, ERR_INVAL, "subscribe.sensor_id = 0 must name a sensor (> 0)");
    return;
  }
  if (w.encoding < CODEC_RAW || w.encoding > CODEC_QZSTD) {
    reply_status(d, c->s, id, ERR_INVAL, "subscribe.encoding = %d is unknown (RAW 0, ZSTD 1, "
                 "QUANTIZED_ZSTD 2)", w.encoding);
    return;
  }
  codec_params_t p = {.encoding = (codec_encoding_t)w.encoding, .level = w.level ? w.level : 1,
                      .precision = w.has_precision ? w.precision : CODEC_DEFAULT_PRECISION};
  if (w.level < 0 || w.level > 19) {
    reply_status(d, c->s, id, ERR_INVAL, "subscribe.level = %d must be in [1, 19] (0: 1)",
                 w.level);
    return;
  }
  // a precision given is checked whatever the encoding: NaN or a negative step sent with a
  // raw subscription is a client's mistake too, and would otherwise pass unnoticed
  if (!(p.precision >= CODEC_MIN_PRECISION && p.precision <= CODEC_MAX_PRECISION)) {
    reply_status(d, c->s, id, ERR_INVAL, "subscribe.precision = %g must be in [%g, %g] m",
                 p.precision, CODEC_MIN_PRECISION, CODEC_MAX_PRECISION);
    return;
  }
  if (p.encoding != CODEC_QZSTD) {
    p.precision = 0.0;
  }
  if (p.encoding == CODEC_RAW) {
    p.level = 1;
  }

  // the fields asked for: names of a point field, no repeats
  wire_stream_params_t sp = {.codec = p};
  if (w.nfield > WIRE_STREAM_MAX_FIELDS) {
    reply_status(d, c->s, id, ERR_INVAL, "subscribe.fields has %zu names, at most %d",
                 w.nfield, WIRE_STREAM_MAX_FIELDS);
    return;
  }
  for (size_t i = 0; i < w.nfield; i++) {
    size_t len = strlen(w.fields[i]);
    if (len == 0 || len >= WIRE_STREAM_FIELD_NAME) {
      reply_status(d, c->s, id, ERR_INVAL, "subscribe.fields[%zu] must be 1 to %d bytes",
                   i, WIRE_STREAM_FIELD_NAME - 1);
      return;
    }
    for (size_t k = 0; k < i; k++) {
      if (strcmp(w.fields[k], w.fields[i]) == 0) {
        reply_status(d, c->s, id, ERR_INVAL,
                     "subscribe.fields[%zu] = \"%s\" is repeated", i, w.fields[i]);
        return;
      }
    }
    memcpy(sp.fields[i], w.fields[i], len + 1);
  }
  sp.nfield = (uint32_t)w.nfield;
  submit_sub_job(d, c, id, w.sensor_id, &sp, 0);
}


// Unsubscribe goes through the environment's queue too, so that it follows a Subscribe sent
// before it.
void subscribe_remove(daemon_t* d, client_t* c, wire_request_t* req) {
  wire_subscribe_t w;
  wire_get_subscribe(req, &w);
  if (w.sensor_id == 0) {
    reply_status(d, c->s, wire_id(req), ERR_INVAL,
                 "unsubscribe.sensor_id = 0 must name a sensor (> 0)");
    return;
  }
  wire_stream_params_t none = {0};
  submit_sub_job(d, c, wire_id(req), w.sensor_id, &none, 1);
}


static void submit_sub_job(daemon_t* d, client_t* c, uint64_t id, uint32_t sensor_id,
                           const wire_stream_params_t* p, int unsubscribe) {
  sub_job_t* sj = mem_calloc(1, sizeof(*sj));
  outbox_slot_t* slot = sj ? outbox_reserve(&c->out) : NULL;
  if (!slot) {
    mem_free(sj);
    reply_status(d, c->s, id, ERR_NOMEM, "out of memory queueing %s",
                 unsubscribe ? "unsubscribe" : "subscribe");
    return;
  }
  sj->base.run = sub_run;
  sj->base.done = sub_done;
  sj->d = d;
  sj->s = c->s;
  sj->slot = slot;
  sj->entry = c->entry;
  sj->id = id;
  sj->sensor_id = sensor_id;
  sj->p = *p;
  sj->unsubscribe = unsubscribe;
  registry_retain(c->entry);
  session_retain(c->s);
  exec_submit(d->exec, &c->entry->queue, &sj->base);
}
