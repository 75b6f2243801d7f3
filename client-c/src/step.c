// SPDX-License-Identifier: MIT
// step.c: time and stepping: UpdateState (the body and joint arrays sent from the caller's
// memory as the *_bytes fields), Step with its output selection, and the step's reply (its
// records, those sent ahead in frames of their own first). The tick's requests are written
// and its reply read by hand, with nanopb's bytes and rules (client-c/README.md).
#include <string.h>

#include "internal.h"


void sensim_state_init_sized(sensim_state_t* state, size_t size) {
  SENSIM_INIT_SIZED(sensim_state_t, state, size, (void)0);
}


void sensim_step_init_sized(sensim_step_t* step, size_t size) {
  SENSIM_INIT_SIZED(sensim_step_t, step, size, { d_.outputs = SENSIM_STEP_OUTPUTS_ALL; });
}


sensim_status_t sensim_need(sensim_client_t* cli, const void* ptr, uint64_t n, const char* what,
                            const char* count) {
  if (n > 0 && ptr == NULL) {
    return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "%s: NULL with %s = %llu", what, count,
                           (unsigned long long)n);
  }
  return SENSIM_OK;
}


// The state checked and copied into *st: a NULL array is refused when its count is not 0
// (body_velocities: optional, not sent when NULL).
static sensim_status_t check_state(sensim_client_t* cli, const sensim_state_t* given,
                                   sensim_state_t* st) {
  sensim_state_init(st);
  sensim_status_t rc = sensim_sized_copy(cli, st, sizeof(*st), given, "state",
                                         "sensim_state_init");
  if (rc != SENSIM_OK ||
      (rc = sensim_need(cli, st->body_ids, st->nbodies, "state.body_ids", "nbodies")) !=
          SENSIM_OK ||
      (rc = sensim_need(cli, st->body_poses, st->nbodies, "state.body_poses", "nbodies")) !=
          SENSIM_OK ||
      (rc = sensim_need(cli, st->joint_ids, st->njoints, "state.joint_ids", "njoints")) !=
          SENSIM_OK ||
      (rc = sensim_need(cli, st->joint_positions, st->njoints, "state.joint_positions",
                        "njoints")) != SENSIM_OK) {
    return rc;
  }
  return SENSIM_OK;
}


// The UpdateState's arrays as the *_bytes fields: (field, caller's memory, bytes), in the
// order of their field numbers; an array given as NULL is not sent.
typedef struct state_arrays {
  uint32_t field[5];
  const void* data[5];
  size_t len[5];
} state_arrays_t;


static uint64_t state_arrays(const sensim_state_t* st, state_arrays_t* a) {
  size_t nb = st->nbodies, nj = st->njoints;
  const state_arrays_t v = {
      {sensim_v1_UpdateState_body_ids_bytes_tag, sensim_v1_UpdateState_body_poses_bytes_tag,
       sensim_v1_UpdateState_body_velocities_bytes_tag, sensim_v1_UpdateState_joint_ids_bytes_tag,
       sensim_v1_UpdateState_joint_positions_bytes_tag},
      {st->body_ids, st->body_poses, st->body_velocities, st->joint_ids, st->joint_positions},
      {4 * nb, 56 * nb, 48 * nb, 4 * nj, 8 * nj}};
  *a = v;
  uint64_t body = 1 + 8;  // the time
  for (int k = 0; k < 5; k++) {
    a->len[k] = a->data[k] ? a->len[k] : 0;
    body += sensim_wire_span_size(a->field[k], a->len[k]);
  }
  return body;
}


// The most bytes the client writes itself for an UpdateState body (keys, lengths, the time).
#define STATE_OWN_MAX (1 + 8 + 5 * (1 + 10))

static void put_state(sensim_gather_t* g, const sensim_state_t* st, const state_arrays_t* a) {
  sensim_wire_put_double(g, sensim_v1_UpdateState_time_tag, st->time);
  for (int k = 0; k < 5; k++) {
    sensim_wire_put_span(g, a->field[k], a->data[k], a->len[k]);
  }
}


static sensim_status_t no_memory(char* err, size_t err_cap) {
  return sensim_fail(err, err_cap, SENSIM_ENOMEM, "out of memory for a request");
}


// sensim_frame_writer_t of an UpdateState (arg: a checked sensim_state_t).
static sensim_status_t write_state(sensim_gather_t* g, uint64_t id, const void* arg,
                                   size_t* size, char* err, size_t err_cap) {
  const sensim_state_t* st = arg;
  state_arrays_t a;
  uint64_t body = state_arrays(st, &a);
  uint32_t tag = sensim_v1_Envelope_update_state_tag;
  if (sensim_wire_body_at(id, tag, body) - FRAME_HEADER + body > UINT32_MAX) {
    return sensim_wire_over_4gib(err, err_cap);
  }
  if (!sensim_wire_reserve(g, FRAME_HEADER + sensim_wire_body_at(id, tag, body) + STATE_OWN_MAX,
                           5)) {
    return no_memory(err, err_cap);
  }
  *size = sensim_wire_put_head(g, id, tag, body);
  put_state(g, st, &a);
  return SENSIM_OK;
}


// Queue an UpdateState.
static sensim_status_t queue_state(sensim_client_t* cli, const sensim_state_t* state,
                                   uint64_t* id) {
  sensim_state_t st;
  sensim_status_t rc = check_state(cli, state, &st);
  return rc != SENSIM_OK ? rc : sensim_queue_written(cli, SLOT_STATUS, write_state, &st, id);
}


sensim_status_t sensim_state_body(sensim_client_t* cli, const sensim_state_t* state,
                                  sensim_gather_t* body) {
  sensim_state_t st;
  sensim_status_t rc = check_state(cli, state, &st);
  if (rc != SENSIM_OK) {
    return rc;
  }
  sensim_gather_reset(body);
  state_arrays_t a;
  if (state_arrays(&st, &a) > UINT32_MAX) {
    return sensim_wire_over_4gib(cli->last_error, sizeof(cli->last_error));
  }
  if (!sensim_wire_reserve(body, STATE_OWN_MAX, 5)) {
    return no_memory(cli->last_error, sizeof(cli->last_error));
  }
  put_state(body, &st, &a);
  return SENSIM_OK;
}


// sensim_frame_writer_t of a Step (arg: a checked sensim_step_t).
static sensim_status_t write_step(sensim_gather_t* g, uint64_t id, const void* arg,
                                  size_t* size, char* err, size_t err_cap) {
  const sensim_step_t* st = arg;
  uint32_t n = st->output_sensors ? st->noutput_sensors : 0;
  uint64_t sensors = sensim_wire_u32s_size(sensim_v1_Step_output_sensors_tag, st->output_sensors,
                                           n);
  // the outputs only when not ALL, the default: a daemon without the field agrees
  uint64_t body = 1 + 8 + (st->outputs != SENSIM_STEP_OUTPUTS_ALL ? 2 : 0) + sensors;
  uint32_t tag = sensim_v1_Envelope_step_tag;
  uint64_t at = sensim_wire_body_at(id, tag, body);
  if (at - FRAME_HEADER + body > UINT32_MAX) {
    return sensim_wire_over_4gib(err, err_cap);
  }
  if (!sensim_wire_reserve(g, at + body, 0)) {
    return no_memory(err, err_cap);
  }
  *size = sensim_wire_put_head(g, id, tag, body);
  sensim_wire_put_double(g, sensim_v1_Step_time_tag, st->time);
  if (st->outputs != SENSIM_STEP_OUTPUTS_ALL) {
    sensim_wire_put_uint(g, sensim_v1_Step_outputs_tag, (uint64_t)st->outputs);
  }
  sensim_wire_put_u32s(g, sensim_v1_Step_output_sensors_tag, st->output_sensors, n);
  return SENSIM_OK;
}


// Queue a Step.
static sensim_status_t queue_step(sensim_client_t* cli, const sensim_step_t* given,
                                  uint64_t* id) {
  sensim_step_t st;
  sensim_step_init(&st);
  sensim_status_t rc = sensim_sized_copy(cli, &st, sizeof(st), given, "step", "sensim_step_init");
  if (rc != SENSIM_OK) {
    return rc;
  }
  if ((unsigned)st.outputs > SENSIM_STEP_OUTPUTS_LISTED) {
    return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "step.outputs = %d is not a "
                           "sensim_step_outputs_t (ALL 0, NONE 1, LISTED 2)", (int)st.outputs);
  }
  if (st.outputs != SENSIM_STEP_OUTPUTS_LISTED && st.noutput_sensors > 0) {
    return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "step.output_sensors: %u sensors with "
                           "outputs other than SENSIM_STEP_OUTPUTS_LISTED", st.noutput_sensors);
  }
  if ((rc = sensim_need(cli, st.output_sensors, st.noutput_sensors, "step.output_sensors",
                        "noutput_sensors")) != SENSIM_OK) {
    return rc;
  }
  // distinct sensors of the environment, so at most max_sensors: the count first, before
  // that many of the caller's ids are read
  uint32_t max = cli->session.limits.max_sensors;
  if (max && st.noutput_sensors > max) {
    return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "step.noutput_sensors = %u: more than "
                           "the daemon's max_sensors %u (the ids are distinct sensors)",
                           st.noutput_sensors, max);
  }
  return sensim_queue_written(cli, SLOT_STEP, write_step, &st, id);
}


sensim_status_t sensim_update_state_send(sensim_client_t* cli, const sensim_state_t* state,
                                         uint64_t* id) {
  if (!cli) {
    return SENSIM_INVALID_ARGUMENT;
  }
  sensim_status_t st = queue_state(cli, state, id);
  return st != SENSIM_OK ? st : sensim_flush(cli);
}


sensim_status_t sensim_update_state(sensim_client_t* cli, const sensim_state_t* state) {
  uint64_t id;
  sensim_status_t st = sensim_update_state_send(cli, state, &id);
  return st != SENSIM_OK ? st : sensim_wait(cli, id, -1);
}


sensim_status_t sensim_step_send(sensim_client_t* cli, const sensim_step_t* step, uint64_t* id) {
  if (!cli) {
    return SENSIM_INVALID_ARGUMENT;
  }
  sensim_status_t st = queue_step(cli, step, id);
  return st != SENSIM_OK ? st : sensim_flush(cli);
}


void sensim_step_select(sensim_v1_StepDone* done, void* ctx) {
  if (!ctx) {
    return;
  }
  done->outputs.funcs.decode = sensim_data_decode_item;
  done->outputs.arg = ctx;
}


//---------------- The step's reply, decoded by hand

// The Envelope of a step's reply and its StepDone are read here from the frame's bytes (the
// records by data.c), as nanopb reads them: the same fields accepted, the same frames refused,
// a repeated sub-message merged. A frame that carries another body of the Envelope's oneof
// (a daemon's error) goes to nanopb whole (sensim_step_reply_nanopb): what it makes of such a
// frame depends on every other message type.

// What the reply's fields say, as nanopb would have filled cli->rx.
typedef struct reply {
  sensim_client_t* cli;
  sensim_v1_StepDone* done;         // merged into
  sensim_data_list_t* list;         // the records appended
  uint64_t id;
  int32_t code;                     // Status.code
  char message[sizeof(((sensim_v1_Status*)0)->message)];
  bool has_body;
  bool other;                       // another body of the Envelope: nanopb's
  sensim_status_t st;               // a record's own failure (its message set)
} reply_t;


// Envelope.status, merged into (code, message) as nanopb merges it.
static bool status_field(sensim_cursor_t* c, uint32_t f, unsigned w, void* arg) {
  reply_t* r = arg;
  uint32_t v;
  switch (f) {
    case sensim_v1_Status_code_tag:
      // an enum without negative values: nanopb reads it as a uint32 (a larger value fails)
      // and keeps its bits
      if (!sensim_cur_u32(c, w, &v)) {
        return false;
      }
      r->code = (int32_t)v;
      return true;
    case sensim_v1_Status_message_tag:
      // a string of at most 511 bytes, NUL-terminated (a NUL inside ends it early)
      if (w != PB_WT_STRING || !sensim_cur_varint32(c, &v) || v >= sizeof(r->message) ||
          v > c->end - c->at) {
        return false;
      }
      memcpy(r->message, c->p + c->at, v);
      r->message[v] = '\0';
      c->at += v;
      return true;
    default:
      return sensim_cur_skip(c, w);
  }
}


// Envelope.step_done, merged into *r->done, its records appended.
static bool step_done_field(sensim_cursor_t* c, uint32_t f, unsigned w, void* arg) {
  reply_t* r = arg;
  sensim_v1_StepDone* done = r->done;
  sensim_cursor_t rec;
  switch (f) {
    case sensim_v1_StepDone_time_tag:
      done->has_time = true;
      return sensim_cur_double(c, w, &done->time);
    case sensim_v1_StepDone_step_tag:
      done->has_step = true;
      return sensim_cur_u64(c, w, &done->step);
    case sensim_v1_StepDone_outputs_tag:
      // a record of any other wire type is refused by sensim_data_decode_item
      return w == PB_WT_STRING && sensim_cur_sub(c, &rec) &&
             (r->st = sensim_data_hand_decode(r->cli, &rec, r->list)) == SENSIM_OK;
    case sensim_v1_StepDone_outputs_in_parts_tag:
      done->has_outputs_in_parts = true;
      return sensim_cur_u32(c, w, &done->outputs_in_parts);
    default:
      return sensim_cur_skip(c, w);
  }
}


// The Envelope's fields; another body of its oneof stops the walk (r->other).
static bool envelope_field(sensim_cursor_t* c, uint32_t f, unsigned w, void* arg) {
  reply_t* r = arg;
  uint64_t sequence;
  switch (f) {
    case sensim_v1_Envelope_id_tag:
      return sensim_cur_u64(c, w, &r->id);
    case sensim_v1_Envelope_status_tag:
      return sensim_cur_message(c, w, status_field, r);
    case sensim_v1_Envelope_sequence_tag:
      return sensim_cur_u64(c, w, &sequence);
    case sensim_v1_Envelope_step_done_tag:
      if (!r->has_body) {
        memset(r->done, 0, sizeof(*r->done));
        r->has_body = true;
      }
      return sensim_cur_message(c, w, step_done_field, r);
    default:
      if (f <= ENVELOPE_MAX_TAG && sensim_wire_body_fields(r->cli->body_fields, (pb_size_t)f)) {
        r->other = true;
        return false;
      }
      return sensim_cur_skip(c, w);
  }
}


sensim_status_t sensim_step_reply_nanopb(sensim_client_t* cli, const sensim_frame_t* f,
                                         sensim_data_list_t* list, sensim_v1_StepDone* done) {
  cli->dec = list;
  cli->dec_body = sensim_v1_Envelope_step_done_tag;
  sensim_status_t st = sensim_decode_reply(cli, f, sensim_v1_Envelope_step_done_tag);
  cli->dec = NULL;
  cli->dec_body = 0;
  if (st == SENSIM_OK) {
    *done = cli->rx.body.step_done;
  }
  return st;
}


sensim_status_t sensim_step_reply(sensim_client_t* cli, const sensim_frame_t* f,
                                  sensim_data_list_t* list, sensim_v1_StepDone* done) {
  uint32_t n0 = list->n;
  reply_t r = {.cli = cli, .done = done, .list = list, .st = SENSIM_OK};
  r.message[0] = '\0';
  sensim_cursor_t c = {.p = f->data, .at = 0, .end = f->len};
  if (!sensim_cur_each(&c, envelope_field, &r)) {
    if (r.other) {
      list->n = n0;
      return sensim_step_reply_nanopb(cli, f, list, done);
    }
    if (r.st == SENSIM_OK) {
      sensim_cli_fail(cli, SENSIM_EPROTO, "cannot decode a reply: the step's reply is "
                      "malformed");
    }
    sensim_client_fail_closed(cli, SENSIM_EPROTO);
    return SENSIM_EPROTO;
  }
  if (r.code != sensim_v1_StatusCode_OK) {
    return sensim_status_from_wire(r.code, r.message, cli->last_error, sizeof(cli->last_error));
  }
  if (!r.has_body) {
    sensim_cli_fail(cli, SENSIM_EPROTO, "reply %llu carries body 0, expected %u",
                    (unsigned long long)r.id, (unsigned)sensim_v1_Envelope_step_done_tag);
    sensim_client_fail_closed(cli, SENSIM_EPROTO);
    return SENSIM_EPROTO;
  }
  return SENSIM_OK;
}


// The result of a done step slot: the parts' records, then the StepDone's own.
static sensim_status_t collect(sensim_client_t* cli, slot_t* s, const sensim_step_result_t** out) {
  sensim_data_list_t list = {0};
  sensim_v1_StepDone done;
  uint32_t parts = 0;
  sensim_status_t st = SENSIM_OK;
  sensim_step_result_t* r = sensim_arena_alloc(cli, sizeof(*r));
  if (!r) {
    st = sensim_cli_fail(cli, SENSIM_ENOMEM, "out of memory for a step's result");
  }
  for (sensim_frame_t* f = s->frames.head; f && st == SENSIM_OK; f = f->next) {
    if (f->next) {
      sensim_sensor_data_t* d = sensim_data_list_add(cli, &list);
      st = d ? sensim_data_from_frame(cli, f, d, NULL)
             : sensim_cli_fail(cli, SENSIM_ENOMEM, "out of memory for a step's records");
      parts++;
      continue;
    }
    st = sensim_step_reply(cli, f, &list, &done);
  }
  if (st == SENSIM_OK) {
    if (done.outputs_in_parts != parts) {
      sensim_cli_fail(cli, SENSIM_EPROTO, "step %llu: %u records came ahead, the reply says %u",
                      (unsigned long long)done.step, parts, (unsigned)done.outputs_in_parts);
      sensim_client_fail_closed(cli, SENSIM_EPROTO);
      st = SENSIM_EPROTO;
    } else {
      r->time = done.time;
      r->step = done.step;
      r->noutputs = list.n;
      r->outputs = list.v;
      r->outputs_in_parts = done.outputs_in_parts;
      *out = r;
    }
  }
  sensim_slot_free(cli, s, st == SENSIM_OK);
  return st;
}


sensim_status_t sensim_step_wait(sensim_client_t* cli, uint64_t id, int timeout_ms,
                                 const sensim_step_result_t** out) {
  if (!cli) {
    return SENSIM_INVALID_ARGUMENT;
  }
  if (!out) {
    return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "out: NULL");
  }
  *out = NULL;
  sensim_views_reset(cli);
  slot_t* s;
  sensim_status_t st = sensim_wait_slot(cli, id, timeout_ms, SLOT_STEP, &s);
  return st != SENSIM_OK ? st : collect(cli, s, out);
}


sensim_status_t sensim_step(sensim_client_t* cli, const sensim_step_t* step,
                            const sensim_step_result_t** out) {
  if (!cli) {
    return SENSIM_INVALID_ARGUMENT;
  }
  if (!out) {
    return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "out: NULL");
  }
  uint64_t id;
  sensim_status_t st = sensim_step_send(cli, step, &id);
  return st != SENSIM_OK ? st : sensim_step_wait(cli, id, -1, out);
}


sensim_status_t sensim_update_and_step_send(sensim_client_t* cli, const sensim_state_t* state,
                                            const sensim_step_t* step, uint64_t* state_id,
                                            uint64_t* step_id) {
  if (!cli) {
    return SENSIM_INVALID_ARGUMENT;
  }
  if (!state_id || !step_id) {
    return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "%s: NULL",
                           state_id ? "step_id" : "state_id");
  }

  // both requests in one write
  sensim_status_t st = queue_state(cli, state, state_id);
  if (st != SENSIM_OK) {
    return st;
  }
  st = queue_step(cli, step, step_id);
  if (st != SENSIM_OK) {
    sensim_gather_reset(&cli->g);  // nothing was sent: drop the queued state too
    sensim_slot_free(cli, sensim_slot(cli, *state_id), false);
    return st;
  }
  return sensim_flush(cli);
}


sensim_status_t sensim_update_and_step(sensim_client_t* cli, const sensim_state_t* state,
                                       const sensim_step_t* step,
                                       const sensim_step_result_t** out) {
  if (!cli) {
    return SENSIM_INVALID_ARGUMENT;
  }
  if (!out) {
    return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "out: NULL");
  }

  // both requests in one write, then both replies
  uint64_t a, b;
  sensim_status_t st = sensim_update_and_step_send(cli, state, step, &a, &b);
  if (st != SENSIM_OK) {
    return st;
  }
  st = sensim_wait(cli, a, -1);
  if (st != SENSIM_OK) {
    // the step fails after a refused state; its reply is not needed
    if (sensim_slot(cli, b)) {
      sensim_discard(cli, b);
    }
    return st;
  }
  return sensim_step_wait(cli, b, -1, out);
}
