// SPDX-License-Identifier: MIT
// subscriber.c: an observer that subscribes to a lidar of an environment and writes every
// cloud pushed to it as a binary PCD file (readable by PCL, Open3D, CloudCompare), decoding
// whichever encoding it asked for.
//
//   sensim_subscriber --sensor ID --out DIR [--host H] [--port P] [--environment NAME]
//                     [--encoding raw|zstd|quantized_zstd] [--precision M] [--count N]
//                     [--timeout-ms T]
//
// Stops after N clouds (default 1) or when nothing came for T ms (default 10000); prints one
// line per file. Exit status 0 when N clouds were written.
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sensim/sensim.h>


static int usage(void) {
  fprintf(stderr, "usage: sensim_subscriber --sensor ID --out DIR [--host H] [--port P] "
                  "[--environment NAME] [--encoding raw|zstd|quantized_zstd] "
                  "[--precision M] [--count N] [--timeout-ms T]\n");
  return 2;
}


// PCD type letter and size of a point field.
static int pcd_type(sensim_datatype_t t, char* type, unsigned* size) {
  static const struct {
    char type;
    unsigned size;
  } k[] = {{0, 0}, {'I', 1}, {'U', 1}, {'I', 2}, {'U', 2}, {'I', 4}, {'U', 4}, {'F', 4}, {'F', 8}};
  if (t < SENSIM_DATATYPE_INT8 || t > SENSIM_DATATYPE_FLOAT64) {
    return -1;
  }
  *type = k[t].type;
  *size = k[t].size;
  return 0;
}


// Write the decoded points (count x point_step bytes) as a binary PCD, the fields packed in
// the order the cloud lists them.
static int write_pcd(const char* path, const sensim_point_cloud_t* c, const uint8_t* points) {
  FILE* f = fopen(path, "wb");
  if (!f) {
    return -1;
  }
  fprintf(f, "# .PCD v0.7 - Point Cloud Data file format\nVERSION 0.7\nFIELDS");
  for (uint32_t i = 0; i < c->nfields; i++) {
    fprintf(f, " %s", c->fields[i].name);
  }
  fprintf(f, "\nSIZE");
  size_t packed = 0;
  for (uint32_t i = 0; i < c->nfields; i++) {
    char type = 0;
    unsigned size = 0;
    if (pcd_type(c->fields[i].datatype, &type, &size) != 0) {
      fclose(f);
      return -1;
    }
    fprintf(f, " %u", size);
    packed += (size_t)size * c->fields[i].count;
  }
  fprintf(f, "\nTYPE");
  for (uint32_t i = 0; i < c->nfields; i++) {
    char type = 0;
    unsigned size = 0;
    pcd_type(c->fields[i].datatype, &type, &size);
    fprintf(f, " %c", type);
  }
  fprintf(f, "\nCOUNT");
  for (uint32_t i = 0; i < c->nfields; i++) {
    fprintf(f, " %" PRIu32, c->fields[i].count);
  }
  fprintf(f, "\nWIDTH %" PRIu32 "\nHEIGHT %" PRIu32 "\nVIEWPOINT 0 0 0 1 0 0 0\nPOINTS %" PRIu32
             "\nDATA binary\n", c->width, c->height, c->count);

  // each point's fields, packed
  uint8_t* rec = malloc(packed ? packed : 1);
  int rc = rec ? 0 : -1;
  for (uint32_t p = 0; p < c->count && rc == 0; p++) {
    size_t at = 0;
    for (uint32_t i = 0; i < c->nfields; i++) {
      char type = 0;
      unsigned size = 0;
      pcd_type(c->fields[i].datatype, &type, &size);
      size_t n = (size_t)size * c->fields[i].count;
      memcpy(rec + at, points + (size_t)p * c->point_step + c->fields[i].offset, n);
      at += n;
    }
    rc = fwrite(rec, 1, packed, f) == packed ? 0 : -1;
  }
  free(rec);
  return fclose(f) == 0 ? rc : -1;
}


int main(int argc, char** argv) {
  const char* host = "127.0.0.1";
  const char* environment = "default";
  const char* out = NULL;
  unsigned long port = 7700, sensor = 0, count = 1, timeout_ms = 10000;
  double precision = 0.001;
  sensim_encoding_t encoding = SENSIM_ENCODING_RAW;
  for (int i = 1; i < argc; i++) {
    if (i + 1 >= argc) {
      return usage();
    }
    const char* opt = argv[i];
    const char* val = argv[++i];
    char* end = NULL;
    errno = 0;
    if (strcmp(opt, "--host") == 0) {
      host = val;
    } else if (strcmp(opt, "--environment") == 0) {
      environment = val;
    } else if (strcmp(opt, "--out") == 0) {
      out = val;
    } else if (strcmp(opt, "--encoding") == 0) {
      if (strcmp(val, "raw") == 0) {
        encoding = SENSIM_ENCODING_RAW;
      } else if (strcmp(val, "zstd") == 0) {
        encoding = SENSIM_ENCODING_ZSTD;
      } else if (strcmp(val, "quantized_zstd") == 0) {
        encoding = SENSIM_ENCODING_QUANTIZED_ZSTD;
      } else {
        return usage();
      }
    } else if (strcmp(opt, "--precision") == 0) {
      precision = strtod(val, &end);
      if (errno || *end) {
        return usage();
      }
    } else {
      unsigned long v = strtoul(val, &end, 10);
      if (errno || *end || end == val) {
        return usage();
      }
      if (strcmp(opt, "--port") == 0) {
        port = v;
      } else if (strcmp(opt, "--sensor") == 0) {
        sensor = v;
      } else if (strcmp(opt, "--count") == 0) {
        count = v;
      } else if (strcmp(opt, "--timeout-ms") == 0) {
        timeout_ms = v;
      } else {
        return usage();
      }
    }
  }
  if (!out || sensor == 0 || port == 0 || port > 65535 || timeout_ms > 3600000) {
    return usage();
  }

  // an observer of the environment, subscribed to the lidar
  sensim_options_t opts;
  sensim_options_init(&opts);
  opts.environment = environment;
  opts.role = SENSIM_ROLE_OBSERVER;
  opts.client_name = "sensim_subscriber";
  sensim_client_t* cli = NULL;
  sensim_status_t st = sensim_client_connect(host, (uint16_t)port, &opts, &cli);
  sensim_subscription_t sub;
  sensim_subscription_init(&sub);
  sub.sensor_id = (uint32_t)sensor;
  sub.encoding = encoding;
  sub.precision = precision;
  if (st == SENSIM_OK) {
    st = sensim_subscribe(cli, &sub);
  }
  if (st != SENSIM_OK) {
    fprintf(stderr, "sensim_subscriber: %s (%s)\n", sensim_client_last_error(cli),
            sensim_status_name(st));
    sensim_client_close(cli);
    return 1;
  }
  printf("subscribed to sensor %lu of '%s'\n", sensor, environment);
  fflush(stdout);

  // each pushed cloud: decode, write
  unsigned long written = 0;
  uint8_t* points = NULL;
  size_t cap = 0;
  while (written < count) {
    const sensim_sensor_data_t* d = NULL;
    st = sensim_next_sensor_data(cli, (int)timeout_ms, &d);
    if (st != SENSIM_OK) {
      fprintf(stderr, "sensim_subscriber: %s (%s)\n", sensim_client_last_error(cli),
              sensim_status_name(st));
      break;
    }
    if (d->end_of_stream) {
      fprintf(stderr, "sensim_subscriber: sensor %lu was removed\n", sensor);
      break;
    }
    if (d->kind != SENSIM_PAYLOAD_POINT_CLOUD) {
      continue;
    }
    const sensim_point_cloud_t* c = &d->point_cloud;
    size_t need = (size_t)c->count * c->point_step;
    if (need > cap) {
      uint8_t* grown = realloc(points, need);
      if (!grown) {
        fprintf(stderr, "sensim_subscriber: out of memory\n");
        break;
      }
      points = grown;
      cap = need;
    }
    st = sensim_point_cloud_read(c, points, cap);
    if (st != SENSIM_OK) {
      fprintf(stderr, "sensim_subscriber: cloud %" PRIu64 " does not decode (%s)\n", d->frame,
              sensim_status_name(st));
      break;
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/cloud_%06" PRIu64 ".pcd", out, d->frame);
    if (write_pcd(path, c, points) != 0) {
      fprintf(stderr, "sensim_subscriber: cannot write %s: %s\n", path, strerror(errno));
      break;
    }
    printf("%s: %" PRIu32 " points, frame %" PRIu64 ", sequence %" PRIu64 ", t = %.6f, "
           "max_error %.3g m\n", path, c->count, d->frame, d->sequence, d->time, c->max_error);
    fflush(stdout);
    written++;
  }
  free(points);
  sensim_client_close(cli);
  return written == count ? 0 : 1;
}
