// SPDX-License-Identifier: MIT
// step.c: time and stepping: UpdateState (the body and joint arrays sent from the caller's
// memory as the *_bytes fields), Step with its output selection, and the step's reply (its
// records, those sent ahead in frames of their own first).
#include <string.h>

#include "internal.h"


void sensim_state_init_sized(sensim_state_t* state, size_t size) {
  sensim_state_t d;
  memset(&d, 0, sizeof(d));
  d.struct_size = (uint32_t)size;
  memcpy(state, &d, size < sizeof(d) ? size : sizeof(d));
}


void sensim_step_init_sized(sensim_step_t* step, size_t size) {
  sensim_step_t d;
  memset(&d, 0, sizeof(d));
  d.struct_size = (uint32_t)size;
  d.outputs = SENSIM_STEP_OUTPUTS_ALL;
  memcpy(step, &d, size < sizeof(d) ? size : sizeof(d));
}


sensim_status_t sensim_need(sensim_client_t* cli, const void* ptr, uint64_t n, const char* what,
                            const char* count) {
  if (n > 0 && ptr == NULL) {
    return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "%s: NULL with %s = %llu", what, count,
                           (unsigned long long)n);
  }
  return SENSIM_OK;
}


// The arrays of an UpdateState, kept while it is encoded.
typedef struct state_spans {
  sensim_span_t ids, poses, vels, jids, jpos;
} state_spans_t;


// Encode the state into cli->tx (sensim_begin done by the caller).
static sensim_status_t encode_state(sensim_client_t* cli, const sensim_state_t* given,
                                    state_spans_t* sp) {
  sensim_state_t st;
  sensim_state_init(&st);
  sensim_status_t rc = sensim_sized_copy(cli, &st, sizeof(st), given, "state",
                                         "sensim_state_init");
  if (rc != SENSIM_OK ||
      (rc = sensim_need(cli, st.body_ids, st.nbodies, "state.body_ids", "nbodies")) != SENSIM_OK ||
      (rc = sensim_need(cli, st.body_poses, st.nbodies, "state.body_poses", "nbodies")) !=
          SENSIM_OK ||
      (rc = sensim_need(cli, st.joint_ids, st.njoints, "state.joint_ids", "njoints")) !=
          SENSIM_OK ||
      (rc = sensim_need(cli, st.joint_positions, st.njoints, "state.joint_positions",
                        "njoints")) != SENSIM_OK) {
    return rc;
  }
  sensim_v1_UpdateState* m = &cli->tx.body.update_state;
  m->has_time = true;
  m->time = st.time;
  size_t nb = st.nbodies, nj = st.njoints;
  sensim_wire_set_span(&m->body_ids_bytes, &sp->ids, st.body_ids, 4 * nb);
  sensim_wire_set_span(&m->body_poses_bytes, &sp->poses, st.body_poses, 56 * nb);
  sensim_wire_set_span(&m->body_velocities_bytes, &sp->vels, st.body_velocities, 48 * nb);
  sensim_wire_set_span(&m->joint_ids_bytes, &sp->jids, st.joint_ids, 4 * nj);
  sensim_wire_set_span(&m->joint_positions_bytes, &sp->jpos, st.joint_positions, 8 * nj);
  return SENSIM_OK;
}


// Queue an UpdateState.
static sensim_status_t queue_state(sensim_client_t* cli, const sensim_state_t* state,
                                   uint64_t* id) {
  state_spans_t sp;
  sensim_begin(cli, sensim_v1_Envelope_update_state_tag);
  sensim_status_t st = encode_state(cli, state, &sp);
  return st != SENSIM_OK ? st : sensim_queue(cli, SLOT_STATUS, id);
}


sensim_status_t sensim_state_body(sensim_client_t* cli, const sensim_state_t* state,
                                  sensim_gather_t* body) {
  state_spans_t sp;
  sensim_begin(cli, sensim_v1_Envelope_update_state_tag);  // a zeroed body; no id is taken
  sensim_status_t st = encode_state(cli, state, &sp);
  return st != SENSIM_OK ? st : sensim_wire_body(body, sensim_v1_UpdateState_fields,
                                                 &cli->tx.body.update_state, cli->last_error,
                                                 sizeof(cli->last_error));
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
  sensim_u32s_t sensors;
  sensim_v1_Step* m = &sensim_begin(cli, sensim_v1_Envelope_step_tag)->body.step;
  m->has_time = true;
  m->time = st.time;
  if (st.outputs != SENSIM_STEP_OUTPUTS_ALL) {  // the default: a daemon without the field agrees
    m->has_outputs = true;
    m->outputs = (sensim_v1_StepOutputs)st.outputs;
  }
  sensim_wire_set_u32s(&m->output_sensors, &sensors, st.output_sensors, st.noutput_sensors);
  return sensim_queue(cli, SLOT_STEP, id);
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


// The result of a done step slot: the parts' records, then the StepDone's own.
static sensim_status_t collect(sensim_client_t* cli, slot_t* s, const sensim_step_result_t** out) {
  sensim_data_list_t list = {0};
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
    cli->dec = &list;
    cli->dec_body = sensim_v1_Envelope_step_done_tag;
    st = sensim_decode_reply(cli, f, sensim_v1_Envelope_step_done_tag);
    cli->dec = NULL;
    cli->dec_body = 0;
  }
  if (st == SENSIM_OK) {
    const sensim_v1_StepDone* done = &cli->rx.body.step_done;
    if (done->outputs_in_parts != parts) {
      sensim_cli_fail(cli, SENSIM_EPROTO, "step %llu: %u records came ahead, the reply says %u",
                      (unsigned long long)done->step, parts, (unsigned)done->outputs_in_parts);
      sensim_client_fail_closed(cli, SENSIM_EPROTO);
      st = SENSIM_EPROTO;
    } else {
      r->time = done->time;
      r->step = done->step;
      r->noutputs = list.n;
      r->outputs = list.v;
      r->outputs_in_parts = done->outputs_in_parts;
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
