// SPDX-License-Identifier: MIT
// pattern.h: lidar scan patterns (docs/models/lidar.md, "Scan patterns"): which rays a lidar
// fires, in which direction and when. Every pattern is a stream of firing groups: group g fires
// at g * group_period after the sweep start time t_s, and its ray k at an extra time_offset[k]
// (a column of a spinning lidar, a VLP-16 firing sequence, a flash frame, one ray of a
// non-repetitive pattern). Spinning patterns add the rotor azimuth at the ray's time. Groups are
// grouped into sweeps (revolutions, frames): a fixed number of groups per sweep, or (VLP-16,
// whose sequences do not divide a revolution) the sweep that contains the group's start time.
//
// One file per model: pattern_spinning.c (generic), pattern_vlp16.c, pattern_ouster.c,
// pattern_bpearl.c, pattern_hdl64e.c, pattern_flash.c, pattern_custom.c, pattern_livox.c;
// pattern.c holds what they share. Directions follow REP-103 (x forward, y left, z up; azimuth
// counter-clockwise from +x seen from above, elevation positive up).
//
// Thread: a pattern is read-only after init; lidar_pattern_ray runs on any thread.
#ifndef SENSIM_LIDAR_PATTERN_H_
#define SENSIM_LIDAR_PATTERN_H_

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

typedef enum lidar_pattern_kind {
  LIDAR_PATTERN_SPINNING = 1,
  LIDAR_PATTERN_VLP16,
  LIDAR_PATTERN_OUSTER,
  LIDAR_PATTERN_BPEARL,
  LIDAR_PATTERN_HDL64E,
  LIDAR_PATTERN_FLASH,
  LIDAR_PATTERN_CUSTOM,
  LIDAR_PATTERN_LIVOX,
} lidar_pattern_kind_t;

// Most rays in one firing group (a custom ray list or a flash frame).
#define LIDAR_PATTERN_MAX_GROUP (1u << 22)

// Bounds every pattern keeps (docs/models/lidar.md, "Bounds"), so that its firing times, sweep
// numbers and ray counts stay finite and exact over the whole time line (state and start times
// within +-1e9 s):
// - the slowest revolution or frame rate, Hz: a sweep lasts at most 10^4 s (a terrestrial
//   scanner's slowest dome scan takes minutes); rates near 0 make sweep times infinite;
#define LIDAR_PATTERN_MIN_RATE 1e-4
// - rays per second: the rays of 2e9 s stay below 2^62, the bound of a lidar's ray cursor;
#define LIDAR_PATTERN_MAX_RAY_RATE 1e9
// - rays per sweep (2^32: a spinning lidar's 2^20 columns x 4096 channels);
#define LIDAR_PATTERN_MAX_SWEEP_RAYS 4294967296.0
// - angles given as azimuths (start azimuths, azimuth offsets, custom azimuths), rad: within
//   one turn either way (2 pi), far from where a double's turn loses its precision.
#define LIDAR_PATTERN_MAX_AZIMUTH 6.283185307179586

// The per-ray trigonometry of a pattern (lidar_pattern_t.trig): the values of ray k are
// trig[k * LIDAR_TRIG_N + LIDAR_TRIG_*].
typedef enum lidar_trig {
  LIDAR_TRIG_CE,                // cos(elevation)
  LIDAR_TRIG_SE,                // sin(elevation)
  LIDAR_TRIG_COFF,              // cos(off), off = azimuth + spin_rate time_offset
  LIDAR_TRIG_SOFF,              // sin(off)
  LIDAR_TRIG_CDT,               // cos(spin_rate time_offset)
  LIDAR_TRIG_SDT,               // sin(spin_rate time_offset)
  LIDAR_TRIG_OFF,               // off wrapped to (-pi, pi]
  LIDAR_TRIG_N
} lidar_trig_t;

// Most groups of a sweep whose rotor values lidar_pattern_prepare tables (24 B a group: 192 KB
// at most; an OS1's 2048 columns take 48 KB). Each group's cos, sin and remainder otherwise
// cost about 1 % of an OS1-128's revolution, twice (for its rays, then for its points).
#define LIDAR_PATTERN_ROTOR_TABLE 8192u
#define LIDAR_ROTOR_N 3

typedef struct lidar_pattern {
  lidar_pattern_kind_t kind;

  // firing groups
  double group_period;          // s between group starts, > 0
  uint32_t nray;                // rays per group
  double* elevation;            // (nray) rad
  double* azimuth;              // (nray) rad: added to the rotor azimuth (static: the azimuth)
  double* time_offset;          // (nray) s after the group start, non-decreasing, < group_period
  uint32_t* ring;               // (nray) channel reported as `ring`
  double* vertical_offset;      // (nray) m, emission origin offset perpendicular to the beam in
                                //   its vertical plane (VLP-16 corrections); NULL = none
  double beam_origin_radius;    // m, emission origin at this radius in the rotor's direction
                                //   (Ouster lidar_origin_to_beam_origin); 0 = none

  // rotor
  double spin_rate;             // rad/s, signed (+ counter-clockwise seen from +z); 0 = static
  double start_azimuth;         // rad, rotor azimuth at the start of every sweep

  // sweeps
  uint64_t groups_per_sweep;    // > 0: this many groups per sweep; 0: by start time (below)
  double sweep_period;          // s, duration of a sweep (1 / frequency)

  // per ray, from lidar_pattern_prepare: cos and sin of the elevation, of the azimuth offset
  // off_k = azimuth[k] + spin_rate time_offset[k] and of spin_rate time_offset[k], and off_k
  // wrapped to (-pi, pi] (LIDAR_TRIG_N values a ray, in the order of lidar_trig_t)
  double* trig;                 // (nray x LIDAR_TRIG_N)

  // per group of a sweep (groups_per_sweep in [1, LIDAR_PATTERN_ROTOR_TABLE]), also from
  // lidar_pattern_prepare: the rotor's cos, sin and azimuth wrapped to (-pi, pi] (the values
  // lidar_pattern_group computes for it, LIDAR_ROTOR_N a group); NULL: computed per group
  double* rotor;                // (groups_per_sweep x LIDAR_ROTOR_N)

  // non-repetitive Risley-prism pattern (LIDAR_PATTERN_LIVOX)
  double prism_rate[2];         // rev/s of the two deflection terms
  double prism_amplitude[2];    // rad, deflection of each term
} lidar_pattern_t;

// One ray of a pattern, in the sensor frame.
typedef struct lidar_pattern_ray {
  double time;                  // s after t_s (the first sweep's start)
  double time_offset;           // s after the start of its sweep
  uint64_t sweep;               // sweep index, from 0
  uint64_t index;               // index within the sweep (firing order)
  double azimuth;               // rad, in (-pi, pi]
  double elevation;             // rad
  double origin[3];             // emission point, m
  double dir[3];                // unit direction
  uint32_t ring;
} lidar_pattern_ray_t;

// Release the tables; the pattern is zeroed. Nullable: p.
void lidar_pattern_close(lidar_pattern_t* p);

// Sweep of group g, and the first group of sweep n.
uint64_t lidar_pattern_sweep_of(const lidar_pattern_t* p, uint64_t g);
uint64_t lidar_pattern_first_group(const lidar_pattern_t* p, uint64_t sweep);

// Start of sweep n, s after t_s.
double lidar_pattern_sweep_start(const lidar_pattern_t* p, uint64_t sweep);

// Time of ray k of group g, s after t_s (the same value lidar_pattern_ray reports).
double lidar_pattern_time(const lidar_pattern_t* p, uint64_t g, uint32_t k);

// What the rays of group g share: its sweep and that sweep's first group, its start time and
// the rotor then (lidar_pattern_rays computes every group's rays from these).
typedef struct lidar_pattern_group {
  uint64_t sweep;
  uint64_t first;               // first group of the sweep
  double t_group;               // s after t_s
  double tau_group;             // s after the start of its sweep
  double cr, sr;                // cos and sin of the rotor azimuth
  double rw;                    // the rotor azimuth wrapped to (-pi, pi]
} lidar_pattern_group_t;

void lidar_pattern_group(const lidar_pattern_t* p, uint64_t g, lidar_pattern_group_t* out);

// Direction and emission origin of a ray (not of a LIDAR_PATTERN_LIVOX pattern) from its
// group's rotor (cr, sr), its trigonometry (lidar_trig_t: ce, se, coff, soff, cdt, sdt), its
// vertical offset vo (has_vo: the pattern has them) and the beam-origin radius (has_radius:
// radius > 0): the direction
// at azimuth rotor + off by angle sums, no trigonometry per ray. lidar_pattern_rays and the
// lidar's packets of rays (sweep.h) both aim through this, so that they give the same bits.
// Inline: it runs once per ray; with has_vo and has_radius known to the compiler, inside
// vectorised loops (it does not vectorise arithmetic under a condition: it may not speculate
// an operation that could raise a floating-point exception).
static inline void lidar_pattern_aim(double cr, double sr, double ce, double se, double coff,
                                     double soff, double cdt, double sdt, double vo, int has_vo,
                                     double radius, int has_radius, double dir[3],
                                     double origin[3]) {
  double ca = cr * coff - sr * soff;
  double sa = sr * coff + cr * soff;
  dir[0] = ce * ca;
  dir[1] = ce * sa;
  dir[2] = se;

  // emission origin: a vertical offset perpendicular to the beam in its vertical plane (the
  // Velodyne correction: xy = r cos(el) - o sin(el), z = r sin(el) + o cos(el)), and a radial
  // offset along the rotor direction at the ray's time (Ouster: p = (r - n) d + n (cos enc,
  // sin enc, 0))
  double o0 = 0.0, o1 = 0.0, o2 = 0.0;
  if (has_vo) {
    o0 = -vo * se * ca;
    o1 = -vo * se * sa;
    o2 = vo * ce;
  }
  if (has_radius) {
    o0 += radius * (cr * cdt - sr * sdt);
    o1 += radius * (sr * cdt + cr * sdt);
  }
  origin[0] = o0;
  origin[1] = o1;
  origin[2] = o2;
}

// Ray k < nray of group g. Output: out.
void lidar_pattern_ray(const lidar_pattern_t* p, uint64_t g, uint32_t k, lidar_pattern_ray_t* out);

// The n rays that follow ray k of group g in firing order (the same values lidar_pattern_ray
// gives one by one, computed group by group). Output: out (n).
void lidar_pattern_rays(const lidar_pattern_t* p, uint64_t g, uint32_t k, size_t n,
                        lidar_pattern_ray_t* out);

// The same with only each ray's time, index, origin and direction written (the rest of each
// record is left as it was).
void lidar_pattern_rays_lean(const lidar_pattern_t* p, uint64_t g, uint32_t k, size_t n,
                             lidar_pattern_ray_t* out);

// Rays per second (average over a sweep).
double lidar_pattern_rate(const lidar_pattern_t* p);

// Farthest a ray's emission origin is from the sensor's origin, m (vertical offsets and the
// beam-origin radius; 0 for the other patterns).
double lidar_pattern_origin_reach(const lidar_pattern_t* p);

// The rings of the rays of a group numbered by elevation, as the ROS velodyne driver numbers
// its lasers (velodyne_pointcloud's calibration: ring 0 is the lowest laser, then upwards):
// out[k] is the rank of ray k's channel (p->ring[k]) among the pattern's channels ordered by
// elevation (a channel of several rays at its rays' mean elevation; equal elevations by channel
// number, lowest first). Output: out (nray). ERR_NOMEM.
int lidar_pattern_elevation_rings(const lidar_pattern_t* p, uint32_t* out, err_msg_t* msg)
    CHECKRET;

//---------------- Models
// Each model's init validates its description (errors name the field under `prefix`, e.g.
// "lidar.vlp16.frequency = 3 is outside [5, 20] Hz") and builds the pattern; its check runs the
// same validation alone, without allocating.

// Generic spinning lidar (channels fire at offsets inside each column).
typedef struct lidar_spinning_desc {
  double frequency;             // Hz, > 0
  uint32_t columns;             // per revolution, > 0
  const double* elevations;     // (nchannel) rad, in [-pi/2, pi/2]
  uint32_t nchannel;            // > 0
  const double* azimuth_offsets;  // (nazimuth_offset) rad; nazimuth_offset 0 = all 0
  uint32_t nazimuth_offset;
  const double* time_offsets;   // (ntime_offset) s, each in [0, 1 / (frequency columns))
  uint32_t ntime_offset;
  int counter_clockwise;        // 0: clockwise seen from +z (Velodyne, Ouster)
  double start_azimuth;         // rad
} lidar_spinning_desc_t;

int lidar_pattern_spinning_init(lidar_pattern_t* p, const lidar_spinning_desc_t* d,
                                const char* prefix, err_msg_t* msg) CHECKRET;
int lidar_pattern_spinning_check(const lidar_spinning_desc_t* d, const char* prefix,
                                 err_msg_t* msg) CHECKRET;

// Velodyne VLP-16: 16 lasers, 2.304 us apart, sequences of 55.296 us in continuous time.
typedef struct lidar_vlp16_desc {
  double frequency;             // Hz, [5, 20]
  int vertical_offsets;         // apply the per-laser origin offsets
  double start_azimuth;         // rad
} lidar_vlp16_desc_t;

int lidar_pattern_vlp16_init(lidar_pattern_t* p, const lidar_vlp16_desc_t* d, const char* prefix,
                             err_msg_t* msg) CHECKRET;
int lidar_pattern_vlp16_check(const lidar_vlp16_desc_t* d, const char* prefix,
                              err_msg_t* msg) CHECKRET;

// Ouster OS1: uniform beams (or per-unit beam_altitude_angles), columns sharing a timestamp.
typedef struct lidar_ouster_desc {
  uint32_t channels;            // 16, 32, 64 or 128
  uint32_t columns;             // 512, 1024 or 2048
  double frequency;             // 10 or 20 Hz
  double elevation_max;         // rad; NAN = the datasheet value for `channels`
  double elevation_min;         // rad; NAN = -elevation_max's default
  const double* altitudes;      // (naltitude) rad, beam_altitude_angles; 0 = uniform
  uint32_t naltitude;
  const double* azimuths;       // (nazimuth) rad, beam_azimuth_angles (lidar frame); 0 = none
  uint32_t nazimuth;
  double beam_origin;           // m, lidar_origin_to_beam_origin, >= 0
} lidar_ouster_desc_t;

int lidar_pattern_ouster_init(lidar_pattern_t* p, const lidar_ouster_desc_t* d,
                              const char* prefix, err_msg_t* msg) CHECKRET;
int lidar_pattern_ouster_check(const lidar_ouster_desc_t* d, const char* prefix,
                               err_msg_t* msg) CHECKRET;

// Half the default vertical field of an OS1 with `channels` beams, rad (the datasheet's 16.6
// degrees for 16 and 64 beams, 22.5 otherwise).
double lidar_pattern_ouster_half_field(uint32_t channels);

// The pixel shift of each beam of an Ouster pattern (p->kind LIDAR_PATTERN_OUSTER): the
// columns by which ouster_ros moves beam i's pixels when it destaggers a scan, so that a column
// of the published cloud looks in one direction, round(alpha_i W / 2 pi) for the beam's
// azimuth angle alpha_i (beam_azimuth_angles, positive clockwise) and W columns. Output: out
// (nray).
void lidar_pattern_ouster_pixel_shifts(const lidar_pattern_t* p, int32_t* out);

// RoboSense RS-Bpearl: 32 channels over a 90 degree vertical field.
typedef struct lidar_bpearl_desc {
  double frequency;             // 10 or 20 Hz
  double start_azimuth;         // rad
} lidar_bpearl_desc_t;

int lidar_pattern_bpearl_init(lidar_pattern_t* p, const lidar_bpearl_desc_t* d,
                              const char* prefix, err_msg_t* msg) CHECKRET;
int lidar_pattern_bpearl_check(const lidar_bpearl_desc_t* d, const char* prefix,
                               err_msg_t* msg) CHECKRET;

// Velodyne HDL-64E: 64 lasers in two blocks, +2 to -24.8 degrees.
typedef struct lidar_hdl64e_desc {
  double frequency;             // Hz, [5, 20]
  uint32_t columns;             // per revolution; 0 = the datasheet point rate
  double start_azimuth;         // rad
} lidar_hdl64e_desc_t;

int lidar_pattern_hdl64e_init(lidar_pattern_t* p, const lidar_hdl64e_desc_t* d,
                              const char* prefix, err_msg_t* msg) CHECKRET;
int lidar_pattern_hdl64e_check(const lidar_hdl64e_desc_t* d, const char* prefix,
                               err_msg_t* msg) CHECKRET;

// Columns per revolution at `frequency` (Hz, in [5, 20]) from the datasheet point rate.
uint32_t lidar_pattern_hdl64e_columns(double frequency);

// Flash (solid-state) grid: every pixel fires at the frame time.
typedef struct lidar_flash_desc {
  uint32_t columns;             // N_h > 0
  uint32_t rows;                // N_v > 0
  double fov_horizontal;        // full angle, rad, (0, 2 pi) (projective: (0, pi))
  double fov_vertical;          // full angle, rad, (0, pi)
  double frame_rate;            // Hz, > 0
  int projective;               // pinhole grid instead of equi-angular
} lidar_flash_desc_t;

int lidar_pattern_flash_init(lidar_pattern_t* p, const lidar_flash_desc_t* d, const char* prefix,
                             err_msg_t* msg) CHECKRET;
int lidar_pattern_flash_check(const lidar_flash_desc_t* d, const char* prefix,
                              err_msg_t* msg) CHECKRET;

// A ray list repeated every 1 / frame_rate.
typedef struct lidar_custom_desc {
  const double* azimuths;       // (nray) rad
  const double* elevations;     // (nray) rad
  const double* time_offsets;   // (ntime_offset) s in [0, 1 / frame_rate); 0 values = all 0
  uint32_t ntime_offset;
  const uint32_t* channels;     // (nchannel) reported as ring; 0 values = the ray's index
  uint32_t nchannel;
  uint32_t nray;
  double frame_rate;            // Hz, > 0
} lidar_custom_desc_t;

int lidar_pattern_custom_init(lidar_pattern_t* p, const lidar_custom_desc_t* d,
                              const char* prefix, err_msg_t* msg) CHECKRET;
int lidar_pattern_custom_check(const lidar_custom_desc_t* d, const char* prefix,
                               err_msg_t* msg) CHECKRET;

// Non-repetitive rosette of two rotating Risley prisms (Livox style).
typedef struct lidar_livox_desc {
  double fov;                   // full cone angle, rad, (0, pi)
  double point_rate;            // rays per second, > 0
  double frame_rate;            // Hz, > 0, <= point_rate
  double prism_rate[2];         // rev/s of each prism term, finite, different
} lidar_livox_desc_t;

int lidar_pattern_livox_init(lidar_pattern_t* p, const lidar_livox_desc_t* d, const char* prefix,
                             err_msg_t* msg) CHECKRET;
int lidar_pattern_livox_check(const lidar_livox_desc_t* d, const char* prefix,
                              err_msg_t* msg) CHECKRET;

//---------------- Shared by the model files

// Allocate the per-ray tables of nray rays (zeroed; vertical_offset only when asked).
int lidar_pattern_alloc(lidar_pattern_t* p, uint32_t nray, int with_vertical_offset,
                        const char* prefix, err_msg_t* msg) CHECKRET;

// Reorder the rays of a group into firing order: increasing time offset, then ring, then as
// given. ERR_NOMEM.
int lidar_pattern_sort(lidar_pattern_t* p, const char* prefix, err_msg_t* msg) CHECKRET;

// Last step of every model's init: the bounds above (a backstop behind each model's own
// checks: ERR_INVAL naming `prefix`), then the per-ray trigonometry (p->trig) once the tables
// and the rotor are set. ERR_INVAL or ERR_NOMEM (the pattern is closed).
int lidar_pattern_prepare(lidar_pattern_t* p, const char* prefix, err_msg_t* msg) CHECKRET;

// Check a finite value; ERR_INVAL "<prefix>.<field> = <v> is not finite".
int lidar_pattern_check_finite(double v, const char* prefix, const char* field,
                               err_msg_t* msg) CHECKRET;

// Check an azimuth given in a configuration: within +-LIDAR_PATTERN_MAX_AZIMUTH; ERR_INVAL
// "<prefix>.<field> = <v> is outside [-2 pi, 2 pi] rad".
int lidar_pattern_check_azimuth(double v, const char* prefix, const char* field,
                                err_msg_t* msg) CHECKRET;

// Check a revolution or frame rate (Hz): in [LIDAR_PATTERN_MIN_RATE, max]; ERR_INVAL
// "<prefix>.<field> = <v> must be in [0.0001, <max>] Hz".
int lidar_pattern_check_rate(double v, double max, const char* prefix, const char* field,
                             err_msg_t* msg) CHECKRET;

// Check the rays per second of a pattern, `rate` sweeps per second (its field rate_field) of
// `rays` each (its fields rays_fields): ERR_INVAL naming "<prefix>.<rate_field> x
// <prefix>.<rays_fields>" when they exceed LIDAR_PATTERN_MAX_RAY_RATE.
int lidar_pattern_check_ray_rate(double rate, double rays, const char* prefix,
                                 const char* rate_field, const char* rays_fields,
                                 err_msg_t* msg) CHECKRET;

#endif  // SENSIM_LIDAR_PATTERN_H_
