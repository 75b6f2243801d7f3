// SPDX-License-Identifier: MIT
// internal.h: the structs behind the client's opaque handle and the helpers shared by its
// files. Never installed; the only client header that includes nanopb's generated code.
//
// Data flow. Sending: a request is encoded by nanopb into a gather (wire.c): its small fields
// into the gather's byte buffer, its bulk arrays as holes that point at the caller's memory;
// transport.c sends the whole as one sendmsg (the kernel copies, the client does not). Bytes
// the socket does not take in nonblocking mode are copied into the output queue. Receiving:
// transport.c reads into a read-ahead buffer and cuts frames; each frame goes to
// client_on_frame, which files it by id: into its request's slot (replies), the pushed queue
// (id 0) or the bin (a reply nobody waits for). Waits decode their slot's frames; views point
// into frames moved to the held list until the next call that returns views.
#ifndef SENSIM_CLIENT_INTERNAL_H
#define SENSIM_CLIENT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <pb_decode.h>
#include <pb_encode.h>

#include "cursor.h"
#include "sensim.pb.h"
#include "sensim/sensim.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the sensim C client sends and receives bulk arrays in host order: little-endian hosts only"
#endif

#define CLIENT_DEFAULT_TIMEOUT_MS 10000
#define CLIENT_DEFAULT_MAX_FRAME (64u << 20)
#define CLIENT_ERROR_CAP 640
#define CLIENT_MAX_INFLIGHT 4096u       // requests in flight (the daemon reads 4096 ahead)
#define CLIENT_RBUF_BYTES (64u << 10)   // read-ahead; larger frames get a buffer of their own
#define CLIENT_POOL_FRAMES 4            // freed frame buffers kept for reuse
#define CLIENT_POOL_MAX_BYTES (64u << 20)  // a larger freed buffer is returned to the system
#define FRAME_HEADER 4

// The highest field number of the Envelope's body (a static check in client.c keeps it so).
#define ENVELOPE_MAX_TAG 63

//---------------- Frames

// A received frame the client holds: a reply waiting for its wait, a pushed record, or the
// frame behind views a call returned.
typedef struct sensim_frame {
  uint8_t* data;
  size_t len;                       // bytes of the Envelope
  size_t cap;                       // bytes allocated
  struct sensim_frame* next;
} sensim_frame_t;

typedef struct sensim_frame_list {
  sensim_frame_t* head;
  sensim_frame_t* tail;
} sensim_frame_list_t;

//---------------- Requests in flight

typedef enum slot_kind {
  SLOT_STATUS = 1,                  // a status alone (scene, sensors, update_state, subscribe)
  SLOT_HELLO,
  SLOT_PING,
  SLOT_INFO,
  SLOT_STEP,                        // sensor_data parts, then step_done
  SLOT_RAYCAST,                     // hits written into the caller's buffer on arrival
} slot_kind_t;

typedef struct slot {
  uint64_t id;                      // 0: free
  uint8_t kind;                     // slot_kind_t
  bool done;                        // the reply is complete
  bool discard;                     // nobody waits: drop the reply
  sensim_frame_list_t frames;       // the reply's frames, in arrival order
  uint32_t code;                    // the final frame's status code (0 when it has none)
  uint32_t body;                    // and its body's field number
  uint32_t nparts;                  // step: records received ahead of the StepDone,
  uint64_t part_bytes;              //   and their bytes (bounded: SENSIM_STEP_MAX_PART*)

  // raycast: decoded when its frame arrives
  sensim_hit_t* hits;
  uint32_t nrays;
  bool omit_misses;                 // asked for the hits alone (RaycastResult.hit_mask)
  sensim_status_t status;
  bool has_serial;
  uint64_t world_serial;
  char* message;                    // the daemon's or the client's message on failure
} slot_t;

//---------------- Encoding with holes (wire.c)

// A run of caller memory sent in place: after byte `at` of the gather's buffer.
typedef struct sensim_hole {
  size_t at;
  const void* data;
  size_t len;
} sensim_hole_t;

// Frames being sent: their own bytes in buf, the caller's arrays as holes between them.
typedef struct sensim_gather {
  uint8_t* buf;
  size_t len, cap;
  sensim_hole_t* holes;
  size_t nholes, holecap;
  size_t bytes;                     // total, holes included
} sensim_gather_t;

// A reader of one frame for nanopb: from memory, or (base NULL) from the socket through the
// read-ahead buffer, straight into the destination of large reads.
typedef struct sensim_reader {
  const uint8_t* base;
  size_t pos;
  sensim_client_t* cli;
  int64_t deadline;
  sensim_status_t failure;          // set when the socket failed
} sensim_reader_t;

// What the outermost fields of an Envelope say.
typedef struct sensim_peek {
  uint64_t id;
  bool has_status;
  uint32_t status_code;
  uint32_t body;                    // the body's field number; 0 = none
} sensim_peek_t;

//---------------- Views

typedef struct arena_chunk {
  struct arena_chunk* next;
  size_t cap, used;
  max_align_t data[];
} arena_chunk_t;

//---------------- The handle

struct sensim_client {
  // connection
  int fd;                           // -1 when closed
  int timeout_ms;                   // <= 0: none
  bool nonblocking;
  uint32_t max_frame_in;
  sensim_status_t closed_status;    // why it closed (OK: never opened)
  char closed_reason[CLIENT_ERROR_CAP];

  // receiving
  bool stream_ok;                   // a blocking call may stream raycast replies into hits
  int64_t stream_deadline;          //   until this deadline
  uint8_t* rbuf;                    // read-ahead
  size_t rstart, rend;              // unread bytes
  sensim_frame_t* big;              // a large frame being received into its own buffer
  size_t big_have;
  bool rx_empty;                    // the last recv took all the socket had: wait before the
                                    //   next one (one system call fewer)
  bool recv_blocks;                 // the socket blocks (bounded by SO_RCVTIMEO): a wait for
                                    //   a reply is one recv, not a poll and a recv

  // sending
  sensim_gather_t g;
  uint8_t* outq;                    // bytes not sent yet (copies), from outq_off
  size_t outq_len, outq_off, outq_cap;

  // requests
  uint64_t next_id;                 // id of the last request sent
  slot_t* slots;                    // ring indexed by id % nslots
  uint32_t nslots;
  bool serial_unknown;              // the daemon's raycast replies carry no world_serial
  uint64_t* deferred;               // set by shard.c: the next request answered by a status
                                    //   alone is sent, its id stored here, and not awaited

  // pushed data
  sensim_frame_list_t pushed;
  uint32_t pushed_frames;
  uint64_t pushed_bytes;
  uint64_t pushed_dropped;
  uint32_t pushed_max_frames;
  uint64_t pushed_max_bytes;

  // views
  sensim_frame_list_t held;         // frames behind the views of the last call
  sensim_frame_t* pool;             // freed frames for reuse
  uint32_t npool;
  arena_chunk_t* arena;

  // session
  sensim_session_t session;
  char server_version[32];
  char environment[64];

  // nanopb scratch envelopes; large (the body union), so kept off the stack
  sensim_v1_Envelope tx;
  sensim_v1_Envelope rx;
  void* dec;                        // what the decode callbacks of the current reply fill,
  pb_size_t dec_body;               //   for a body of this tag (any other body gets none)
  sensim_status_t dec_failed;       // a decode callback's own failure (message set)
  const pb_msgdesc_t* body_fields[ENVELOPE_MAX_TAG + 1];   // the body types of the Envelope
                                    //   by field number, found once each (sensim_queue)
  unsigned noinit_envelope;         // pb_decode_ex flags of an Envelope and of a SensorData,
  unsigned noinit_data;             //   found once at connect (sensim_wire_noinit_*)

  char last_error[CLIENT_ERROR_CAP];
};

// The body of a *_init_sized function: zeros, the struct size, the defaults statement, then
// as much of it as the caller's struct holds.
#define SENSIM_INIT_SIZED(type, dst, size, defaults)                  \
  do {                                                                \
    if (!(dst)) {                                                     \
      break; /* nothing to fill */                                    \
    }                                                                 \
    type d_;                                                          \
    memset(&d_, 0, sizeof(d_));                                       \
    d_.struct_size = (uint32_t)(size);                                \
    defaults;                                                         \
    memcpy((dst), &d_, (size) < sizeof(d_) ? (size) : sizeof(d_));    \
  } while (0)

//---------------- status.c

// Format a failure into err (err_cap bytes) and return st, so that callers can write
// `return sensim_fail(...)`.
sensim_status_t sensim_fail(char* err, size_t err_cap, sensim_status_t st, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

// True for a status code the protocol defines (sensim.v1.StatusCode).
bool sensim_status_is_wire(uint32_t code);

// The status of a daemon's reply with status `code` and `message`: the code itself when the
// protocol defines it, else SENSIM_EUNKNOWN (never one of the client's own codes), with the
// detail written into err (err_cap bytes): the message, after the number for an unknown code.
sensim_status_t sensim_status_from_wire(int32_t code, const char* message, char* err,
                                        size_t err_cap);

// The same into the handle's last error.
sensim_status_t sensim_cli_fail(sensim_client_t* cli, sensim_status_t st, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

//---------------- client.c

// Milliseconds on the monotonic clock.
int64_t sensim_now_ms(void);

// The deadline of a wait of timeout_ms (< 0: the handle's timeout; -1 = none).
int64_t sensim_deadline(const sensim_client_t* cli, int timeout_ms);

// Close the connection after a failure: every request in flight fails with st and the
// message now in the last error.
void sensim_client_fail_closed(sensim_client_t* cli, sensim_status_t st);

// Start a request with body `tag`: a zeroed cli->tx with the next id. Returns the envelope.
sensim_v1_Envelope* sensim_begin(sensim_client_t* cli, pb_size_t tag);

// Encode cli->tx as a frame, send it (with any frames already in the gather) and take a slot
// of `kind` for its reply. *id, if given, receives the id.
sensim_status_t sensim_send(sensim_client_t* cli, slot_kind_t kind, uint64_t* id);

// Encode cli->tx as a frame into the gather without sending (several requests in one write).
sensim_status_t sensim_queue(sensim_client_t* cli, slot_kind_t kind, uint64_t* id);

// Queue a request written by hand: write appends the frame of request `id` to g (arg its
// input) and sets *size to the Envelope's bytes, or returns SENSIM_ENOMEM,
// SENSIM_RESOURCE_EXHAUSTED (over 4 GiB) or SENSIM_EPROTO (message in err, the gather as it
// was).
typedef sensim_status_t (*sensim_frame_writer_t)(sensim_gather_t* g, uint64_t id,
                                                 const void* arg, size_t* size, char* err,
                                                 size_t err_cap);
sensim_status_t sensim_queue_written(sensim_client_t* cli, slot_kind_t kind,
                                     sensim_frame_writer_t write, const void* arg, uint64_t* id);

// Send what the gather holds.
sensim_status_t sensim_flush(sensim_client_t* cli);

// Queue a request whose body (Envelope field `tag`) was encoded already (sensim_wire_body),
// framed with this handle's next id, as sensim_queue does for cli->tx.
sensim_status_t sensim_queue_body(sensim_client_t* cli, uint32_t tag, const sensim_gather_t* body,
                                  slot_kind_t kind, uint64_t* id);

// The slot of request id, or NULL.
slot_t* sensim_slot(sensim_client_t* cli, uint64_t id);

// Wait until slot id is done (timeouts as sensim_wait). On SENSIM_OK *out is the slot; the
// caller collects it with sensim_slot_free.
sensim_status_t sensim_wait_slot(sensim_client_t* cli, uint64_t id, int timeout_ms,
                                 slot_kind_t kind, slot_t** out);

// Release a collected slot; its frames go to the held list (with_views) or the pool.
void sensim_slot_free(sensim_client_t* cli, slot_t* s, bool with_views);

// Decode the reply in frame f into cli->rx (from memory; views into f stay valid while f
// is held). On a non-OK status returns it with the daemon's message as the last error.
sensim_status_t sensim_decode_reply(sensim_client_t* cli, const sensim_frame_t* f,
                                    pb_size_t want_body);

// Decode one Envelope from `in` into cli->rx, the body's inner callbacks set by the
// *_select functions below. SENSIM_EPROTO (message set) when it does not decode.
sensim_status_t sensim_decode_envelope(sensim_client_t* cli, pb_istream_t* in);

// Set the inner decode callbacks of a selected body (info.c, step.c, raycast.c, data.c) to
// fill ctx: cli->dec when the body is the one expected (cli->dec_body), else NULL (a body the
// daemon should not have sent, decoded without its inner fields and then refused).
void sensim_info_select(sensim_v1_Info* info, void* ctx);
void sensim_step_select(sensim_v1_StepDone* done, void* ctx);
void sensim_raycast_select(sensim_v1_RaycastResult* result, void* ctx);
void sensim_data_select(sensim_v1_SensorData* data, void* ctx);
void sensim_describe_select(sensim_v1_Description* description, void* ctx);

// The limits of a HelloReply or Info.
void sensim_limits_from(const sensim_v1_Limits* m, sensim_limits_t* out);

// INVALID_ARGUMENT "what: NULL with count = n" when ptr is NULL and n > 0.
sensim_status_t sensim_need(sensim_client_t* cli, const void* ptr, uint64_t n, const char* what,
                            const char* count);

// Copy name (NULL: none) into a nanopb string field of cap bytes; INVALID_ARGUMENT naming
// `what` when it is longer.
sensim_status_t sensim_set_name(sensim_client_t* cli, char* dst, size_t cap, bool* has,
                                const char* name, const char* what);

// Send, wait and collect a request answered by a status alone (with cli->deferred set: send,
// store the id there, clear it, and return without waiting).
sensim_status_t sensim_call_status(sensim_client_t* cli);

// Start a call that returns views: the previous call's views are released.
void sensim_views_reset(sensim_client_t* cli);

// n bytes of view memory (aligned for any type), valid until the next views reset; NULL when
// memory ran out.
void* sensim_arena_alloc(sensim_client_t* cli, size_t n);

// Room for one more element of an array of n elements of elem bytes in view memory: old when
// n < *cap, else a copy twice as large (*cap updated; the old copy stays in the arena until
// the views reset); NULL when memory ran out.
void* sensim_arena_grow(sensim_client_t* cli, const void* old, uint32_t n, uint32_t* cap,
                        size_t elem);

// A copy of the n bytes at s, NUL-terminated, in view memory.
char* sensim_arena_strndup(sensim_client_t* cli, const char* s, size_t n);

// Called by the transport for every complete frame (the bytes are the frame's, to be taken or
// copied). `owned` frames come in their own buffer, which the callee takes.
sensim_status_t sensim_client_on_frame(sensim_client_t* cli, sensim_frame_t* owned,
                                       const uint8_t* data, size_t len);

// Frame buffers: a recycled one of at least n bytes, or a new one; NULL when memory ran out.
sensim_frame_t* sensim_frame_get(sensim_client_t* cli, size_t n);
void sensim_frame_put(sensim_client_t* cli, sensim_frame_t* f);

// Copy a C string into a fixed nanopb field; false if it does not fit.
bool sensim_copy_str(char* dst, size_t cap, const char* src);

// Check a description struct's struct_size and copy it over local (which holds the
// defaults): INVALID_ARGUMENT naming `what` when it is NULL or was not initialised.
sensim_status_t sensim_sized_copy(sensim_client_t* cli, void* local, size_t local_size,
                                  const void* given, const char* what, const char* init);
// The same, its message written into err (err_cap bytes): for handles other than a client.
sensim_status_t sensim_sized_copy_err(char* err, size_t err_cap, void* local, size_t local_size,
                                      const void* given, const char* what, const char* init);

//---------------- wire.c

void sensim_gather_reset(sensim_gather_t* g);
void sensim_gather_free(sensim_gather_t* g);

// The nanopb type of the Envelope's body field `tag`, or NULL when it has none: looked up in
// the Envelope's descriptor once per tag and kept in cache (ENVELOPE_MAX_TAG + 1 entries), so
// that the walk over the Envelope's fields is not repeated for every request.
const pb_msgdesc_t* sensim_wire_body_fields(const pb_msgdesc_t** cache, pb_size_t tag);

// The refusal of a request over 4 GiB (SENSIM_RESOURCE_EXHAUSTED: more than any frame holds;
// nothing sent, the connection goes on), its message written into err.
sensim_status_t sensim_wire_over_4gib(char* err, size_t err_cap);

// Append one frame (length prefix, Envelope): a request of this id whose body field `tag` is
// the message `body` of nanopb type `fields`, encoded once (the Envelope's head is written by
// hand, the same bytes nanopb would write for it). Returns SENSIM_OK, SENSIM_ENOMEM,
// SENSIM_RESOURCE_EXHAUSTED (over 4 GiB) or SENSIM_EPROTO (nanopb refused); *size is the
// Envelope's bytes.
sensim_status_t sensim_wire_frame(sensim_gather_t* g, uint64_t id, uint32_t tag,
                                  const pb_msgdesc_t* fields, const void* body, size_t* size,
                                  char* err, size_t err_cap);

// Encode msg (of nanopb type fields) alone, no frame, into g (reset first): a request body
// encoded once and framed for several connections by sensim_wire_frame_body.
sensim_status_t sensim_wire_body(sensim_gather_t* g, const pb_msgdesc_t* fields, const void* msg,
                                 char* err, size_t err_cap);

// Append one frame: an Envelope of this id whose body field `tag` holds the encoded body
// (its own bytes copied, its holes referenced). *size is the Envelope's bytes.
sensim_status_t sensim_wire_frame_body(sensim_gather_t* g, uint64_t id, uint32_t tag,
                                       const sensim_gather_t* body, size_t* size, char* err,
                                       size_t err_cap);

// Bytes of the frame before the body of an Envelope with this id and body field `tag` whose
// body has `body` bytes: the length prefix, the id, the body's key and length.
size_t sensim_wire_body_at(uint64_t id, uint32_t tag, uint64_t body);

// Bytes of v as a varint.
size_t sensim_wire_varint_size(uint64_t v);

// Bodies written by hand (the tick's UpdateState and Step: nanopb's generic walk over the
// descriptors cost more than the rest of the request), the same bytes nanopb writes for
// the same message (fields in the order of their numbers, none that is empty or unset).
// Room for `own` bytes and `holes` holes first (false when memory runs out); then each put
// appends, counting the gather's bytes: the frame's length prefix and Envelope head for a
// body of `body` bytes (returns the Envelope's bytes), a double, a varint, a bytes field sent
// from the caller's memory (a hole; nothing when empty), a packed uint32 array (nothing when
// empty). The sizes: a span's or packed array's field, key and length included.
bool sensim_wire_reserve(sensim_gather_t* g, size_t own, size_t holes);
size_t sensim_wire_put_head(sensim_gather_t* g, uint64_t id, uint32_t tag, uint64_t body);
void sensim_wire_put_double(sensim_gather_t* g, uint32_t field, double v);
void sensim_wire_put_uint(sensim_gather_t* g, uint32_t field, uint64_t v);
void sensim_wire_put_span(sensim_gather_t* g, uint32_t field, const void* data, size_t len);
void sensim_wire_put_u32s(sensim_gather_t* g, uint32_t field, const uint32_t* v, uint32_t n);
size_t sensim_wire_span_size(uint32_t field, size_t len);
size_t sensim_wire_u32s_size(uint32_t field, const uint32_t* v, uint32_t n);

// Encode callbacks: bulk arrays sent from the caller's memory. arg points at a sensim_span_t.
typedef struct sensim_span {
  const void* data;
  size_t len;                       // bytes
} sensim_span_t;
bool sensim_wire_encode_span(pb_ostream_t* s, const pb_field_t* f, void* const* arg);

// Set callback cb to send span (nothing when it is empty).
void sensim_wire_set_span(pb_callback_t* cb, sensim_span_t* span, const void* data, size_t len);

// Encode callback: a packed repeated uint32 (varints) from the caller's array (arg:
// sensim_u32s_t; nothing when it is empty).
typedef struct sensim_u32s {
  const uint32_t* v;
  uint32_t n;
} sensim_u32s_t;
bool sensim_wire_encode_u32s(pb_ostream_t* s, const pb_field_t* f, void* const* arg);
void sensim_wire_set_u32s(pb_callback_t* cb, sensim_u32s_t* arr, const uint32_t* v, uint32_t n);

// Encode callback: a list of C strings (arg: sensim_strings_t).
typedef struct sensim_strings {
  const char* const* v;
  uint32_t n;
} sensim_strings_t;
bool sensim_wire_encode_strings(pb_ostream_t* s, const pb_field_t* f, void* const* arg);

// Vec3 and Pose fields with every component present.
void sensim_wire_vec3(sensim_v1_Vec3* v, const double a[3]);
void sensim_wire_pose(sensim_v1_Pose* p, const sensim_pose_t* pose);

// A nanopb input stream over one frame read by r, of len bytes.
pb_istream_t sensim_wire_istream(sensim_reader_t* r, size_t len);

// pb_decode_ex flags for a zeroed Envelope / SensorData: PB_DECODE_NOINIT when zero is the
// default of every field nanopb would set before decoding (the generated defaults are all
// zero: no [default] in them or in a sub-message outside their oneofs, whose members nanopb
// sets when it selects one), which skips its pass over every field; else 0. Each compares two
// whole structs: the handle keeps the answers (noinit_envelope, noinit_data).
unsigned sensim_wire_noinit_envelope(void);
unsigned sensim_wire_noinit_data(void);

// In a decode callback: the rest of the field as a view into the memory frame (skipped).
// The reader behind a stream a decode callback gets, or NULL: nanopb hands a callback of a
// field that came with a scalar wire type (a hostile frame) a stream over a copy of the value
// on its stack instead.
sensim_reader_t* sensim_wire_reader(const pb_istream_t* s);

bool sensim_wire_view(pb_istream_t* s, const uint8_t** data, size_t* len);

// Walk the outermost fields of the Envelope in p[0..len). false: not a valid Envelope.
bool sensim_wire_peek(const uint8_t* p, size_t len, sensim_peek_t* out);

// The id of an Envelope from its first bytes: 1 found, 0 need more bytes, -1 the first field
// is not the id.
int sensim_wire_peek_id(const uint8_t* p, size_t len, uint64_t* id);

//---------------- transport.c

// Resolve host and connect within the handle's timeout. SENSIM_OK, SENSIM_ECONNECT or
// SENSIM_ETIMEDOUT; the socket is non-blocking.
sensim_status_t sensim_transport_connect(sensim_client_t* cli, const char* host, uint16_t port);

// Send the gather (after the output queue). Blocking mode waits until every byte is sent or
// the deadline passes (reading what arrives meanwhile); nonblocking mode copies what the
// socket does not take. The gather is empty afterwards.
sensim_status_t sensim_transport_send(sensim_client_t* cli, int64_t deadline);

// Send queued bytes and receive what has arrived, waiting until the deadline (-1: forever;
// now: not at all) for at least one complete frame or some progress. Returns SENSIM_OK when
// something moved, SENSIM_EAGAIN when the deadline passed first, or a transport failure.
sensim_status_t sensim_transport_pump(sensim_client_t* cli, int64_t deadline);

// Read exactly n bytes of the current frame into dst (NULL: skip), from the read-ahead buffer
// and then the socket, before the deadline.
sensim_status_t sensim_transport_read(sensim_client_t* cli, uint8_t* dst, size_t n,
                                      int64_t deadline);

// Close the socket and drop the receive state (not the slots). Safe when closed.
void sensim_transport_close(sensim_client_t* cli);

//---------------- data.c

// Decode the SensorData of frame f (a pushed frame or a step's part) into d; views point
// into f.
sensim_status_t sensim_data_from_frame(sensim_client_t* cli, const sensim_frame_t* f,
                                       sensim_sensor_data_t* d, uint64_t* sequence);

// Decode callback of a repeated SensorData (StepDone.outputs; arg: a sensim_data_list_t it
// appends to).
typedef struct sensim_data_list {
  sensim_sensor_data_t* v;
  uint32_t n, cap;
} sensim_data_list_t;
bool sensim_data_decode_item(pb_istream_t* s, const pb_field_t* f, void** arg);

// Decode one record of a StepDone's outputs by hand from c (a cursor over the record's bytes
// in the frame, moved to its end) and append it to list: SENSIM_OK, or SENSIM_EPROTO (message
// set) where nanopb with sensim_data_decode_item would fail.
sensim_status_t sensim_data_hand_decode(sensim_client_t* cli, sensim_cursor_t* c,
                                        sensim_data_list_t* list);

// Append one record to a list in view memory; NULL when memory ran out.
sensim_sensor_data_t* sensim_data_list_add(sensim_client_t* cli, sensim_data_list_t* l);

//---------------- step.c

// Check the state and encode its UpdateState body into `body` (sensim_wire_body), for
// sensim_queue_body on several connections; a refusal's message is cli's last error.
sensim_status_t sensim_state_body(sensim_client_t* cli, const sensim_state_t* state,
                                  sensim_gather_t* body);

// Decode the final frame f of a step's reply: its StepDone's own fields into *done, its
// records appended to list. SENSIM_OK; the daemon's status; SENSIM_EPROTO (message set, the
// connection closed) for a frame nanopb refuses too. sensim_step_reply reads the bytes by
// hand (a frame with another body through nanopb), sensim_step_reply_nanopb through nanopb
// and sensim_data_decode_item alone: the reference it is tested against.
sensim_status_t sensim_step_reply(sensim_client_t* cli, const sensim_frame_t* f,
                                  sensim_data_list_t* list, sensim_v1_StepDone* done);
sensim_status_t sensim_step_reply_nanopb(sensim_client_t* cli, const sensim_frame_t* f,
                                         sensim_data_list_t* list, sensim_v1_StepDone* done);

//---------------- raycast.c

// Decode a raycast reply in a memory frame into its slot.
void sensim_raycast_on_frame(sensim_client_t* cli, slot_t* s, const uint8_t* data, size_t len);

// Decode a raycast reply streamed from the socket (len bytes) into its slot. Returns
// SENSIM_OK or the transport failure (connection closed).
sensim_status_t sensim_raycast_stream(sensim_client_t* cli, slot_t* s, size_t len,
                                      int64_t deadline);

#endif  // SENSIM_CLIENT_INTERNAL_H
