// SPDX-License-Identifier: MIT
// client_test.mjs: a real Foxglove WebSocket peer of the bridge. @foxglove/ws-protocol's client
// (over the `ws` package) connects, lists the channels, subscribes to a point cloud, an IMU and
// /tf, and decodes what arrives with the schema each channel advertises (@foxglove/rosmsg parses
// the ros1msg text, @foxglove/rosmsg-serialization reads the messages): no code of the bridge
// is involved in the decoding. Then it unsubscribes from the cloud and counts what still comes.
// Driven by tests/python/test_foxglove_client.py:
//
//   node client_test.mjs WS_URL OUT_DIR CLOUD_TOPIC IMU_TOPIC
//
// Writes OUT_DIR/cloud<k>.bin (the points of each cloud decoded, as they are in data) and
// OUT_DIR/cloud<k>_xyzi.bin (float32 x y z intensity per point, read through the advertised
// fields), and prints one JSON line: the channels and the decoded messages.
import { writeFileSync } from 'node:fs';
import wsProtocol from '@foxglove/ws-protocol';
import { parse } from '@foxglove/rosmsg';
import { MessageReader, StandardTypeReader } from '@foxglove/rosmsg-serialization';
import WebSocket from 'ws';

const { FoxgloveClient } = wsProtocol;   // a CommonJS package: its exports hang off the default

const [url, out, cloudTopic, imuTopic] = process.argv.slice(2);
if (!url || !out || !cloudTopic || !imuTopic) {
  console.error('usage: node client_test.mjs WS_URL OUT_DIR CLOUD_TOPIC IMU_TOPIC');
  process.exit(2);
}
// LATE_IMUS: IMU samples counted after the cloud's unsubscription (one a step; the lidar
// completes a cloud every other step, so as many clouds would have come had it not worked)
const CLOUDS = 3, IMUS = 20, LATE_IMUS = 12, TIMEOUT_MS = 120000;
// The count starts once the bridge has answered an unsubscription it refuses (of MARK, no
// subscription), sent after the cloud's: it answers a viewer's requests in order, through the
// one queue of what it sends it, so no cloud sent before the unsubscription can come after that.
const MARK = 4294967295;

const client = new FoxgloveClient({
  ws: new WebSocket(url, [FoxgloveClient.SUPPORTED_SUBPROTOCOL]),
});
const channels = new Map();     // id -> channel
const readers = new Map();      // channel id -> MessageReader
const subs = new Map();         // subscription id -> channel
const result = { serverInfo: null, channels: [], clouds: [], imus: [], tf: [], status: [],
                 times: 0, afterUnsubscribe: null };
let phase = 'collect';
let late = { clouds: 0, imus: 0 };

function fail(message) {
  console.log(JSON.stringify({ error: message, ...result }));
  process.exit(1);
}
const timer = setTimeout(() => fail(`timed out in phase ${phase}`), TIMEOUT_MS);

// Decode with the advertised schema, and check the message is exactly that long.
function decode(channel, data) {
  let reader = readers.get(channel.id);
  if (!reader) {
    reader = new MessageReader(parse(channel.schema, { ros2: false }));
    readers.set(channel.id, reader);
  }
  const std = new StandardTypeReader(data);
  const msg = new reader.reader(std);
  if (std.offset !== data.byteLength) {
    fail(`${channel.topic}: the schema reads ${std.offset} of the message's ` +
         `${data.byteLength} bytes`);
  }
  return msg;
}

const stamp = (h) => ({ seq: h.seq, sec: h.stamp.sec, nsec: h.stamp.nsec, frame_id: h.frame_id });
const vec = (v) => [v.x, v.y, v.z];

function onCloud(msg, timestamp) {
  const k = result.clouds.length;
  const data = Buffer.from(msg.data.buffer, msg.data.byteOffset, msg.data.byteLength);
  writeFileSync(`${out}/cloud${k}.bin`, data);
  // x y z intensity of every point through the advertised fields (float32 expected)
  const view = new DataView(msg.data.buffer, msg.data.byteOffset, msg.data.byteLength);
  const field = (name) => msg.fields.find((f) => f.name === name);
  const names = ['x', 'y', 'z', 'intensity'];
  for (const n of names) {
    if (!field(n) || field(n).datatype !== 7) fail(`cloud: no float32 field ${n}`);
  }
  const n = msg.height * msg.width;
  const xyzi = new Float32Array(4 * n);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < 4; j++) {
      xyzi[4 * i + j] = view.getFloat32(i * msg.point_step + field(names[j]).offset, true);
    }
  }
  writeFileSync(`${out}/cloud${k}_xyzi.bin`, Buffer.from(xyzi.buffer));
  result.clouds.push({
    header: stamp(msg.header), timestamp: timestamp.toString(), height: msg.height,
    width: msg.width, fields: msg.fields.map((f) => [f.name, f.offset, f.datatype, f.count]),
    is_bigendian: msg.is_bigendian, point_step: msg.point_step, row_step: msg.row_step,
    data_bytes: msg.data.byteLength, is_dense: msg.is_dense,
  });
}

function onImu(msg, timestamp) {
  result.imus.push({
    header: stamp(msg.header), timestamp: timestamp.toString(),
    orientation: [msg.orientation.x, msg.orientation.y, msg.orientation.z, msg.orientation.w],
    orientation_covariance: Array.from(msg.orientation_covariance),
    angular_velocity: vec(msg.angular_velocity),
    angular_velocity_covariance: Array.from(msg.angular_velocity_covariance),
    linear_acceleration: vec(msg.linear_acceleration),
    linear_acceleration_covariance: Array.from(msg.linear_acceleration_covariance),
  });
}

function maybeDone() {
  if (phase !== 'collect' || result.clouds.length < CLOUDS || result.imus.length < IMUS) return;
  // stop the cloud: nothing of it may arrive once in-flight messages are through
  phase = 'unsubscribed';
  for (const [sub, ch] of subs) {
    if (ch.topic === cloudTopic) { client.unsubscribe(sub); subs.delete(sub); }
  }
  client.unsubscribe(MARK);
}

function onStatus(s) {
  if (phase === 'unsubscribed' && s.message.includes(`no subscription ${MARK}`)) {
    phase = 'counting';
    late = { clouds: 0, imus: 0 };
  } else {
    result.status.push(s);
  }
}

// The count ends on the LATE_IMUS-th IMU sample, not after a wall-clock time: a slow machine
// steps fewer times a second.
function maybeCounted() {
  if (phase !== 'counting' || late.imus < LATE_IMUS) return;
  phase = 'done';
  result.afterUnsubscribe = late;
  clearTimeout(timer);
  console.log(JSON.stringify(result));
  client.close();
  process.exit(0);
}

client.on('error', (err) => fail(`client error: ${err}`));
client.on('close', () => {
  if (phase !== 'counting' && phase !== 'done') fail('connection closed');
});
client.on('serverInfo', (info) => { result.serverInfo = info; });
client.on('status', onStatus);
client.on('time', () => { result.times += 1; });
client.on('advertise', (list) => {
  for (const ch of list) {
    channels.set(ch.id, ch);
    result.channels.push({ id: ch.id, topic: ch.topic, encoding: ch.encoding,
                           schemaName: ch.schemaName, schemaEncoding: ch.schemaEncoding });
    if (phase === 'collect' && [cloudTopic, imuTopic, '/tf'].includes(ch.topic)) {
      subs.set(client.subscribe(ch.id), ch);
    }
  }
});
client.on('message', ({ subscriptionId, timestamp, data }) => {
  const ch = subs.get(subscriptionId);
  if (!ch) {
    if (phase === 'collect') fail(`a message for subscription ${subscriptionId}, not ours`);
    if (phase === 'counting') late.clouds += 1;   // our only dropped subscription is the cloud
    return;
  }
  const msg = decode(ch, data);
  if (ch.topic === cloudTopic) {
    if (phase === 'counting') late.clouds += 1;
    else if (result.clouds.length < CLOUDS) onCloud(msg, timestamp);
  } else if (ch.topic === imuTopic) {
    if (phase === 'counting') { late.imus += 1; maybeCounted(); return; }
    else if (result.imus.length < IMUS) onImu(msg, timestamp);
  } else if (result.tf.length < 5) {
    result.tf.push(msg.transforms.map((t) => ({
      header: stamp(t.header), child: t.child_frame_id,
      translation: vec(t.transform.translation),
      rotation: [t.transform.rotation.x, t.transform.rotation.y, t.transform.rotation.z,
                 t.transform.rotation.w] })));
  }
  maybeDone();
});
