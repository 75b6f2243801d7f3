// SPDX-License-Identifier: MIT
// view.js: the built-in page of sensim's Foxglove bridge. A foxglove.websocket.v1 client of
// the bridge that serves it: it subscribes to the point clouds picked (sensor_msgs/PointCloud2,
// ROS 1 encoding) and to /tf, and draws each cloud with three.js in the world frame when the
// transforms reach it (in its own frame otherwise), coloured by height or intensity.
// window.sensimView holds its counters (tests read them).
import * as THREE from 'three';
import { OrbitControls } from './vendor/OrbitControls.js';

const SUBPROTOCOL = 'foxglove.websocket.v1';
const CLOUD = 'sensor_msgs/PointCloud2';
const TF = 'tf2_msgs/TFMessage';
const RATE_WINDOW_MS = 2000;   // clouds per second over this window

const $ = (id) => document.getElementById(id);
const state = {
  ws: null,
  channels: new Map(),         // channel id -> channel (advertised)
  subs: new Map(),             // subscription id -> channel id
  nextSub: 1,
  clouds: new Map(),           // channel id -> { points, frameId, lastSeq }
  frames: new Map(),           // child frame -> { parent, t: Vector3, q: Quaternion }
  arrivals: [],                // times (ms) of the clouds received, for the rate
  renders: [],
};
const stats = window.sensimView = {
  connected: false, clouds: 0, points: 0, cloudRate: 0, renderRate: 0, missed: 0,
  frameId: '', lastSeq: null, drawnInWorld: false, topics: [], errors: [],
};

// ------------------------------------------------------------------ scene

const renderer = new THREE.WebGLRenderer({ antialias: false, preserveDrawingBuffer: true });
renderer.setPixelRatio(window.devicePixelRatio);
document.body.appendChild(renderer.domElement);
const scene = new THREE.Scene();
scene.background = new THREE.Color(0x15181c);
const camera = new THREE.PerspectiveCamera(60, 1, 0.05, 2000);
camera.up.set(0, 0, 1);                          // REP-103: z up
camera.position.set(-14, -10, 12);
const controls = new OrbitControls(camera, renderer.domElement);
controls.target.set(4, 0, 0);
controls.update();
const grid = new THREE.GridHelper(100, 100, 0x3a414b, 0x262b31);
grid.rotation.x = Math.PI / 2;                   // the grid in the world's x-y plane
scene.add(grid);

function resize() {
  renderer.setSize(window.innerWidth, window.innerHeight);
  camera.aspect = window.innerWidth / Math.max(1, window.innerHeight);
  camera.updateProjectionMatrix();
}
window.addEventListener('resize', resize);
resize();

// ------------------------------------------------------------------ ROS 1 decoding

const utf8 = new TextDecoder();

class Reader {
  constructor(view, offset) { this.view = view; this.pos = offset; }
  u8() { const v = this.view.getUint8(this.pos); this.pos += 1; return v; }
  u32() { const v = this.view.getUint32(this.pos, true); this.pos += 4; return v; }
  f64() { const v = this.view.getFloat64(this.pos, true); this.pos += 8; return v; }
  string() {
    const n = this.u32();
    const s = utf8.decode(new Uint8Array(this.view.buffer, this.view.byteOffset + this.pos, n));
    this.pos += n;
    return s;
  }
  header() {
    return { seq: this.u32(), sec: this.u32(), nsec: this.u32(), frameId: this.string() };
  }
}

// sensor_msgs/PointCloud2: the layout of ros1.point_cloud2 in the bridge.
function readCloud(view, offset) {
  const r = new Reader(view, offset);
  const header = r.header();
  const height = r.u32(), width = r.u32();
  const fields = [];
  for (let n = r.u32(); n > 0; n--) {
    fields.push({ name: r.string(), offset: r.u32(), datatype: r.u8(), count: r.u32() });
  }
  const bigEndian = r.u8() !== 0;
  const pointStep = r.u32(), rowStep = r.u32();
  const size = r.u32();
  if (bigEndian || size !== height * width * pointStep || r.pos + size > view.byteLength) {
    throw new Error(`cloud ${header.frameId}: ${size} data bytes for ${height} x ${width} ` +
                    `points of ${pointStep} bytes`);
  }
  // the points, copied to a buffer of their own so typed arrays can view them aligned
  const data = view.buffer.slice(view.byteOffset + r.pos, view.byteOffset + r.pos + size);
  return { header, count: height * width, fields, pointStep, rowStep, data };
}

// tf2_msgs/TFMessage
function readTransforms(view, offset) {
  const r = new Reader(view, offset);
  const out = [];
  for (let n = r.u32(); n > 0; n--) {
    const header = r.header();
    const child = r.string();
    const t = new THREE.Vector3(r.f64(), r.f64(), r.f64());
    const q = new THREE.Quaternion(r.f64(), r.f64(), r.f64(), r.f64());
    out.push({ parent: header.frameId, child, t, q });
  }
  return out;
}

// A function i -> value of a scalar field, fast for aligned float32 fields.
const GETTERS = {
  1: 'getInt8', 2: 'getUint8', 3: 'getInt16', 4: 'getUint16',
  5: 'getInt32', 6: 'getUint32', 7: 'getFloat32', 8: 'getFloat64',
};
function fieldReader(cloud, name) {
  const f = cloud.fields.find((x) => x.name === name);
  if (!f || !GETTERS[f.datatype]) return null;
  if (f.datatype === 7 && f.offset % 4 === 0 && cloud.pointStep % 4 === 0) {
    const a = new Float32Array(cloud.data, 0, (cloud.count * cloud.pointStep) / 4);
    const stride = cloud.pointStep / 4, base = f.offset / 4;
    return (i) => a[i * stride + base];
  }
  const view = new DataView(cloud.data);
  const get = GETTERS[f.datatype];
  return (i) => view[get](i * cloud.pointStep + f.offset, true);
}

// ------------------------------------------------------------------ transforms

// The pose of a frame in the root of its tree (world), or null when a link is missing.
function worldMatrix(frameId) {
  const m = new THREE.Matrix4();
  const link = new THREE.Matrix4();
  let f = frameId;
  for (let depth = 0; depth < 64; depth++) {
    if (f === 'world') return m;
    const tr = state.frames.get(f);
    if (!tr) return null;
    link.compose(tr.t, tr.q, new THREE.Vector3(1, 1, 1));
    m.premultiply(link);
    f = tr.parent;
  }
  return null;                                  // a cycle
}

// ------------------------------------------------------------------ colours

// blue -> cyan -> green -> yellow -> red
const STOPS = [[0.18, 0.32, 0.95], [0.1, 0.85, 0.95], [0.2, 0.9, 0.3], [0.98, 0.9, 0.15],
               [0.95, 0.2, 0.15]];
function ramp(u, out, k) {
  const x = Math.min(0.9999, Math.max(0, u)) * (STOPS.length - 1);
  const i = Math.floor(x), w = x - i, a = STOPS[i], b = STOPS[i + 1];
  out[k] = a[0] + (b[0] - a[0]) * w;
  out[k + 1] = a[1] + (b[1] - a[1]) * w;
  out[k + 2] = a[2] + (b[2] - a[2]) * w;
}

// ------------------------------------------------------------------ clouds

function draw(channelId, cloud) {
  let entry = state.clouds.get(channelId);
  if (!entry) {
    const geometry = new THREE.BufferGeometry();
    const material = new THREE.PointsMaterial({ size: 2, sizeAttenuation: false,
                                                vertexColors: true });
    const points = new THREE.Points(geometry, material);
    points.matrixAutoUpdate = false;
    points.frustumCulled = false;
    scene.add(points);
    entry = { points, capacity: 0, lastSeq: null };
    state.clouds.set(channelId, entry);
  }
  if (entry.lastSeq !== null && cloud.header.seq > entry.lastSeq + 1) {
    stats.missed += cloud.header.seq - entry.lastSeq - 1;
  }
  entry.lastSeq = cloud.header.seq;

  const x = fieldReader(cloud, 'x'), y = fieldReader(cloud, 'y'), z = fieldReader(cloud, 'z');
  if (!x || !y || !z) throw new Error(`cloud ${cloud.header.frameId}: no x y z fields`);
  const intensity = fieldReader(cloud, 'intensity') || fieldReader(cloud, 'reflectivity');
  if (cloud.count > entry.capacity) {
    entry.capacity = cloud.count;
    const g = entry.points.geometry;
    g.setAttribute('position', new THREE.BufferAttribute(new Float32Array(3 * cloud.count), 3));
    g.setAttribute('color', new THREE.BufferAttribute(new Float32Array(3 * cloud.count), 3));
  }
  const pos = entry.points.geometry.attributes.position.array;
  const col = entry.points.geometry.attributes.color.array;
  const world = worldMatrix(cloud.header.frameId);
  entry.points.matrix.copy(world || new THREE.Matrix4());
  const e = entry.points.matrix.elements;      // column-major: world z = e2 x + e6 y + e10 z + e14

  // finite points only; misses at the origin (0, 0, 0) are left out too
  let n = 0;
  const value = new Float32Array(cloud.count);
  let lo = Infinity, hi = -Infinity;
  const byHeight = $('color').value === 'height' || !intensity;
  for (let i = 0; i < cloud.count; i++) {
    const px = x(i), py = y(i), pz = z(i);
    if (!Number.isFinite(px) || !Number.isFinite(py) || !Number.isFinite(pz)) continue;
    if (px === 0 && py === 0 && pz === 0) continue;
    pos[3 * n] = px; pos[3 * n + 1] = py; pos[3 * n + 2] = pz;
    const v = byHeight ? e[2] * px + e[6] * py + e[10] * pz + e[14] : intensity(i);
    value[n++] = v;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  // intensities span decades: a square root spreads the dim ones
  const scale = hi > lo ? 1 / (hi - lo) : 0;
  for (let k = 0; k < n; k++) {
    const u = (value[k] - lo) * scale;
    ramp(byHeight ? u : Math.sqrt(u), col, 3 * k);
  }
  const g = entry.points.geometry;
  g.attributes.position.needsUpdate = true;
  g.attributes.color.needsUpdate = true;
  g.setDrawRange(0, n);

  stats.clouds += 1;
  stats.points = n;
  stats.frameId = cloud.header.frameId;
  stats.lastSeq = cloud.header.seq;
  stats.drawnInWorld = world !== null;
  state.arrivals.push(performance.now());
  $('points').textContent = n.toLocaleString('en');
  $('frame').textContent = world !== null || cloud.header.frameId === 'world'
    ? '' : `in ${cloud.header.frameId} (no transform to world)`;
  $('missed').textContent = stats.missed ? `${stats.missed} missed` : '';
}

// ------------------------------------------------------------------ protocol

function send(obj) {
  if (state.ws && state.ws.readyState === WebSocket.OPEN) state.ws.send(JSON.stringify(obj));
}

// Subscribe to what the picker asks for (and /tf), unsubscribe from the rest.
function resubscribe() {
  const pick = $('sensor').value;
  const want = new Set();
  for (const ch of state.channels.values()) {
    if (ch.encoding !== 'ros1') continue;
    const picked = pick === 'all' || pick === ch.topic;
    if (ch.schemaName === TF || (ch.schemaName === CLOUD && picked)) {
      want.add(ch.id);
    }
  }
  const drop = [];
  for (const [sub, ch] of state.subs) {
    if (!want.has(ch)) { drop.push(sub); state.subs.delete(sub); }
  }
  if (drop.length) send({ op: 'unsubscribe', subscriptionIds: drop });
  const have = new Set(state.subs.values());
  const add = [];
  for (const ch of want) {
    if (!have.has(ch)) {
      const id = state.nextSub++;
      state.subs.set(id, ch);
      add.push({ id, channelId: ch });
    }
  }
  if (add.length) send({ op: 'subscribe', subscriptions: add });
  for (const [ch, entry] of state.clouds) {
    entry.points.visible = want.has(ch);
    if (!want.has(ch)) entry.lastSeq = null;
  }
}

function refreshPicker() {
  const select = $('sensor');
  const chosen = select.value;
  const topics = [...state.channels.values()].filter((c) => c.schemaName === CLOUD)
    .map((c) => c.topic).sort();
  stats.topics = topics;
  select.replaceChildren(new Option('all clouds', 'all'), ...topics.map((t) => new Option(t, t)));
  const asked = new URLSearchParams(location.search).get('topic');
  select.value = topics.includes(chosen) ? chosen : (topics.includes(asked) ? asked : 'all');
}

function onText(msg) {
  if (msg.op === 'advertise') {
    for (const ch of msg.channels) state.channels.set(ch.id, ch);
    refreshPicker();
    resubscribe();
  } else if (msg.op === 'unadvertise') {
    for (const id of msg.channelIds) {
      state.channels.delete(id);
      for (const [sub, ch] of state.subs) if (ch === id) state.subs.delete(sub);
      const entry = state.clouds.get(id);
      if (entry) {
        scene.remove(entry.points);
        entry.points.geometry.dispose();
        state.clouds.delete(id);
      }
    }
    refreshPicker();
    resubscribe();
  } else if (msg.op === 'status' && msg.level >= 1) {
    stats.errors.push(msg.message);
    console.warn('bridge:', msg.message);
  }
}

function onBinary(buffer) {
  const view = new DataView(buffer);
  if (view.getUint8(0) !== 1) return;              // 0x02 Time: the page does not need it
  const ch = state.subs.get(view.getUint32(1, true));
  const channel = state.channels.get(ch);
  if (!channel) return;                             // unsubscribed meanwhile
  try {
    if (channel.schemaName === TF) {
      for (const tr of readTransforms(view, 13)) {
        state.frames.set(tr.child, { parent: tr.parent, t: tr.t, q: tr.q });
      }
    } else if (channel.schemaName === CLOUD) {
      draw(ch, readCloud(view, 13));
    }
  } catch (err) {
    stats.errors.push(String(err));
    console.error(err);
  }
}

function connect() {
  const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/`;
  $('ws-url').textContent = url;
  const ws = new WebSocket(url, [SUBPROTOCOL]);
  ws.binaryType = 'arraybuffer';
  state.ws = ws;
  ws.onopen = () => {
    stats.connected = true;
    $('state').textContent = 'live';
    $('state').className = 'ok';
  };
  ws.onmessage = (ev) => {
    if (typeof ev.data === 'string') onText(JSON.parse(ev.data));
    else onBinary(ev.data);
  };
  ws.onclose = () => {
    stats.connected = false;
    $('state').textContent = 'disconnected: retrying';
    $('state').className = 'bad';
    // a bridge that comes back advertises afresh: nothing of the old session stays drawn
    state.channels.clear();
    state.subs.clear();
    for (const entry of state.clouds.values()) {
      scene.remove(entry.points);
      entry.points.geometry.dispose();
    }
    state.clouds.clear();
    setTimeout(connect, 1000);
  };
}

$('sensor').addEventListener('change', resubscribe);
connect();

// ------------------------------------------------------------------ drawing and rates

function rate(times, now) {
  while (times.length && now - times[0] > RATE_WINDOW_MS) times.shift();
  return times.length / (RATE_WINDOW_MS / 1000);
}

function frame() {
  controls.update();
  renderer.render(scene, camera);
  const now = performance.now();
  state.renders.push(now);
  stats.cloudRate = rate(state.arrivals, now);
  stats.renderRate = rate(state.renders, now);
  $('fps').textContent = stats.cloudRate.toFixed(1);
  $('render-fps').textContent = stats.renderRate.toFixed(0);
  requestAnimationFrame(frame);
}
requestAnimationFrame(frame);
