// SPDX-License-Identifier: MIT
// bench_codec.cc: point-cloud encodings on one OS1-128 2048x10 revolution with 1 cm range
// noise (xyz + intensity, misses as zero points), traced by the core in this process: raw
// float32 + zstd-1, each of the project's encodings, and Draco 1.5 (the sequential encoder at
// a quantization matched to 1 mm, and the kd-tree encoder), one thread, medians of repeated
// runs. Prints
//   BENCH <name> <value> <unit>
// bytes per point, encode and decode Mpts/s, max error (m), and the ratios
// qzstd_size_over_draco (against the smaller of the two Draco sizes) and
// qzstd_encode_speed_over_draco (against the faster Draco encoder, the sequential one, as the
// median of interleaved pairs of encodings), and qzstd_fed_encode_speed_over_unfed (the
// quantized encoder given the lidar's azimuths and stride beside the points, as the daemon
// does, over the same encoder without them; exits when their bytes differ).
#include <draco/compression/decode.h>
#include <draco/compression/encode.h>
#include <draco/point_cloud/point_cloud_builder.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_codec_scan.h"

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}


double median_time(int reps, const std::function<void()>& f) {
  std::vector<double> t;
  for (int i = 0; i < reps; i++) {
    double t0 = now();
    f();
    t.push_back(now() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}


struct result {
  double bytes_per_point;
  double encode_mpts;
  double decode_mpts;
  double max_error;
};


void print(const char* name, const result& r) {
  std::printf("BENCH %s_bytes_per_point %.4f B\n", name, r.bytes_per_point);
  std::printf("BENCH %s_encode %.2f Mpts/s\n", name, r.encode_mpts);
  std::printf("BENCH %s_decode %.2f Mpts/s\n", name, r.decode_mpts);
  if (r.max_error >= 0) {
    std::printf("BENCH %s_max_error %.6f m\n", name, r.max_error);
  }
}


double max_error_xyz(const uint8_t* a, const uint8_t* b, uint32_t n, uint32_t step) {
  double worst = 0;
  for (uint32_t i = 0; i < n; i++) {
    float pa[3], pb[3];
    std::memcpy(pa, a + (size_t)i * step, 12);
    std::memcpy(pb, b + (size_t)i * step, 12);
    double d = std::hypot(std::hypot((double)pa[0] - pb[0], (double)pa[1] - pb[1]),
                          (double)pa[2] - pb[2]);
    worst = std::max(worst, d);
  }
  return worst;
}


result ours(int enc, int level, double precision, const uint8_t* pts, uint32_t n, uint32_t step,
            int reps) {
  std::vector<uint8_t> out(scan_max_size(enc, pts, n, step));
  std::vector<uint8_t> back((size_t)n * step);
  size_t len = 0;
  double err = 0;
  double te = median_time(reps, [&] {
    len = scan_encode(enc, level, precision, pts, n, step, out.data(), &err);
  });
  double td = median_time(reps, [&] { scan_decode(enc, out.data(), len, n, step, back.data()); });
  if (enc != 2 && std::memcmp(back.data(), pts, back.size()) != 0) {
    std::fprintf(stderr, "bench_codec: lossless encoding %d does not round-trip\n", enc);
    std::exit(1);
  }
  double measured = max_error_xyz(pts, back.data(), n, step);
  if (measured > err * (1 + 1e-9) + 1e-12) {
    std::fprintf(stderr, "bench_codec: measured error %g above the stated %g\n", measured, err);
    std::exit(1);
  }
  return {(double)len / n, n / te * 1e-6, n / td * 1e-6, measured};
}


// A Draco encoder set up for the cloud: its point cloud, the encoder and the extent.
struct draco_case {
  std::unique_ptr<draco::PointCloud> pc;
  draco::Encoder enc;
  double extent = 0;
  int bits = 0;
  draco::EncoderBuffer buf;

  void encode() {
    buf.Clear();
    draco::Status st = enc.EncodePointCloudToBuffer(*pc, &buf);
    if (!st.ok()) {
      std::fprintf(stderr, "bench_codec: draco: %s\n", st.error_msg());
      std::exit(1);
    }
  }
};


void draco_setup(draco_case* d, bool kd_tree, const uint8_t* pts, uint32_t n, uint32_t step) {
  draco::PointCloudBuilder builder;
  builder.Start(n);
  int pos = builder.AddAttribute(draco::GeometryAttribute::POSITION, 3, draco::DT_FLOAT32);
  int gen = builder.AddAttribute(draco::GeometryAttribute::GENERIC, 1, draco::DT_FLOAT32);
  builder.SetAttributeValuesForAllPoints(pos, pts, step);
  builder.SetAttributeValuesForAllPoints(gen, pts + 12, step);
  d->pc = builder.Finalize(false);

  // quantization matched to 1 mm: the grid step over the largest extent is at most 1 mm
  float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
  for (uint32_t i = 0; i < n; i++) {
    float p[3];
    std::memcpy(p, pts + (size_t)i * step, 12);
    for (int k = 0; k < 3; k++) {
      lo[k] = std::min(lo[k], p[k]);
      hi[k] = std::max(hi[k], p[k]);
    }
  }
  d->extent = std::max({hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]});
  d->bits = (int)std::ceil(std::log2(d->extent / 0.001 + 1.0));
  d->enc.SetAttributeQuantization(draco::GeometryAttribute::POSITION, d->bits);
  if (kd_tree) {
    // the kd-tree encoder needs every attribute quantized: intensity at 16 bits
    d->enc.SetAttributeQuantization(draco::GeometryAttribute::GENERIC, 16);
  }
  d->enc.SetEncodingMethod(kd_tree ? draco::POINT_CLOUD_KD_TREE_ENCODING
                                   : draco::POINT_CLOUD_SEQUENTIAL_ENCODING);
  d->enc.SetSpeedOptions(5, 5);
}


result draco_run(bool kd_tree, const uint8_t* pts, uint32_t n, uint32_t step, int reps) {
  draco_case d;
  draco_setup(&d, kd_tree, pts, n, step);
  const draco::EncoderBuffer& buf = d.buf;
  const double extent = d.extent;
  const int bits = d.bits;
  double te = median_time(reps, [&] { d.encode(); });
  std::unique_ptr<draco::PointCloud> back;
  double td = median_time(reps, [&] {
    draco::DecoderBuffer db;
    db.Init(buf.data(), buf.size());
    draco::Decoder dec;
    back = std::move(dec.DecodePointCloudFromBuffer(&db).value());
  });

  // the sequential encoder keeps the order: measure; the kd-tree reorders: the grid's bound
  double err = -1;
  if (!kd_tree && back && back->num_points() == n) {
    const draco::PointAttribute* a = back->GetNamedAttribute(draco::GeometryAttribute::POSITION);
    err = 0;
    for (uint32_t i = 0; i < n; i++) {
      float q[3], p[3];
      a->GetMappedValue(draco::PointIndex(i), q);
      std::memcpy(p, pts + (size_t)i * step, 12);
      err = std::max(err, std::hypot(std::hypot((double)p[0] - q[0], (double)p[1] - q[1]),
                                     (double)p[2] - q[2]));
    }
  } else {
    err = std::sqrt(3.0) * 0.5 * extent / (std::ldexp(1.0, bits) - 1);
  }
  return {(double)buf.size() / n, n / te * 1e-6, n / td * 1e-6, err};
}

// Draco's encoding time over ours (QUANTIZED_ZSTD at 1 mm, level 1) in interleaved pairs (one
// of each, alternating which goes first), so that a change of the machine's load touches both
// sides alike: the median and the lowest decile of the pairs' ratios. Each timed encoding
// follows an untimed one of the same encoder, so that both are timed with their data and
// tables in the caches, as in the separate medians.
void paired_encode_ratio(bool kd_tree, const uint8_t* pts, uint32_t n, uint32_t step, int reps,
                         double* median, double* low) {
  draco_case d;
  draco_setup(&d, kd_tree, pts, n, step);
  std::vector<uint8_t> out(scan_max_size(2, pts, n, step));
  std::vector<double> ratio;
  double err = 0;
  for (int r = 0; r < reps; r++) {
    double t[2];
    for (int k = 0; k < 2; k++) {
      int which = (r + k) % 2;
      double t0 = 0;
      for (int warm = 0; warm < 2; warm++) {
        t0 = now();
        if (which == 0) {
          scan_encode(2, 1, 0.001, pts, n, step, out.data(), &err);
        } else {
          d.encode();
        }
      }
      t[which] = now() - t0;
    }
    ratio.push_back(t[1] / t[0]);
  }
  std::sort(ratio.begin(), ratio.end());
  *median = ratio[ratio.size() / 2];
  *low = ratio[ratio.size() / 10];
}

// The quantized encoder (1 mm, level 1) fed by the lidar (its azimuths of the points and its
// stride) against the same encoder recovering them from the positions, in interleaved pairs as
// paired_encode_ratio: the median and lowest decile of the unfed time over the fed one. Exits
// when the two encodings differ in a byte.
void paired_fed_ratio(const uint8_t* pts, uint32_t n, uint32_t step, const float* azimuth,
                      uint32_t stride, int reps, double* median, double* low) {
  std::vector<uint8_t> out[2];
  size_t len[2] = {0, 0};
  std::vector<double> ratio;
  double err = 0;
  for (int k = 0; k < 2; k++) {
    out[k].resize(scan_max_size(2, pts, n, step));
  }
  for (int r = 0; r < reps; r++) {
    double t[2];
    for (int k = 0; k < 2; k++) {
      int fed = (r + k) % 2;
      double t0 = 0;
      for (int warm = 0; warm < 2; warm++) {
        t0 = now();
        len[fed] = scan_encode_fed(2, 1, 0.001, pts, n, step, fed ? azimuth : nullptr,
                                   fed ? stride : 0, out[fed].data(), &err);
      }
      t[fed] = now() - t0;
    }
    ratio.push_back(t[0] / t[1]);
  }
  if (len[0] != len[1] || std::memcmp(out[0].data(), out[1].data(), len[0]) != 0) {
    std::fprintf(stderr, "bench_codec: the encoder fed by the lidar writes other bytes\n");
    std::exit(1);
  }
  std::sort(ratio.begin(), ratio.end());
  *median = ratio[ratio.size() / 2];
  *low = ratio[ratio.size() / 10];
}

}  // namespace


int main(int argc, char** argv) {
  int reps = 21;  // medians of 21: a loaded machine moves single runs
  const char* dump = nullptr;
  for (int i = 1; i < argc; i++) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      reps = 3;
    } else if (std::strcmp(argv[i], "--dump") == 0 && i + 1 < argc) {
      dump = argv[++i];
    } else {
      std::fprintf(stderr, "usage: bench_codec [--quick] [--dump FILE]\n"
                   "  --dump FILE  also write the scan's points (16-byte xyzi records)\n");
      return 2;
    }
  }
  uint32_t n, step, stride;
  float* azimuth;
  uint8_t* pts = scan_make_fed(&n, &step, &azimuth, &stride);
  if (dump) {
    FILE* f = std::fopen(dump, "wb");
    if (!f || std::fwrite(pts, step, n, f) != n || std::fclose(f) != 0) {
      std::fprintf(stderr, "bench_codec: cannot write %s\n", dump);
      return 1;
    }
  }
  std::printf("# OS1-128 2048x10 revolution: %u points of %u bytes (xyz + intensity)\n", n, step);
  result raw = ours(0, 1, 0, pts, n, step, reps);
  result zstd1 = ours(1, 1, 0, pts, n, step, reps);
  result q1 = ours(2, 1, 0.001, pts, n, step, reps);
  result q3 = ours(2, 3, 0.001, pts, n, step, reps);
  result dseq = draco_run(false, pts, n, step, reps);
  result dkd = draco_run(true, pts, n, step, reps);
  print("raw", raw);
  print("raw_zstd1", zstd1);
  print("qzstd_1mm_level1", q1);
  print("qzstd_1mm_level3", q3);
  print("draco_sequential_1mm", dseq);
  print("draco_kdtree_1mm", dkd);
  double best_draco = std::min(dseq.bytes_per_point, dkd.bytes_per_point);
  std::printf("BENCH qzstd_bytes_per_point %.4f B\n", q1.bytes_per_point);
  std::printf("BENCH qzstd_size_over_draco %.3f ratio\n", q1.bytes_per_point / best_draco);
  // against the faster Draco encoder, in interleaved pairs
  double ratio, low;
  paired_encode_ratio(dkd.encode_mpts > dseq.encode_mpts, pts, n, step, reps, &ratio, &low);
  std::printf("BENCH qzstd_encode_speed_over_draco %.2f ratio\n", ratio);
  std::printf("# encode speed over Draco %s: median of %d interleaved pairs %.2f, lowest "
              "decile %.2f; separate medians %.2f\n",
              dkd.encode_mpts > dseq.encode_mpts ? "kd-tree" : "sequential", reps, ratio, low,
              q1.encode_mpts / std::max(dseq.encode_mpts, dkd.encode_mpts));
  std::printf("BENCH qzstd_decode_speed_over_draco %.2f ratio\n",
              q1.decode_mpts / std::max(dseq.decode_mpts, dkd.decode_mpts));
  // the lidar's azimuths and stride beside the points (as the daemon passes them) against none
  double fed, fed_low;
  paired_fed_ratio(pts, n, step, azimuth, stride, reps, &fed, &fed_low);
  std::printf("BENCH qzstd_fed_encode_speed_over_unfed %.3f ratio\n", fed);
  std::printf("# encode speed fed by the lidar (its azimuths, stride %u) over recovering them: "
              "median of %d interleaved pairs %.3f, lowest decile %.3f; the same bytes\n",
              stride, reps, fed, fed_low);
  std::free(azimuth);
  std::free(pts);
  return 0;
}
