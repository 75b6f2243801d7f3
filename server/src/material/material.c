// SPDX-License-Identifier: MIT
// material.c: surface materials (docs/models/materials.md): AGXUnity defaults and validation of
// every parameter range, with messages that name the wire field (e.g.
// "two_layer.diffuse_roughness").
#include "material/material.h"

#include "material/check.h"


surface_material_t material_default_lambertian(void) {
  surface_material_t m = {0};
  m.kind = MATERIAL_LAMBERTIAN;
  m.reflectance = 0.8;
  return m;
}


surface_material_t material_default_two_layer(void) {
  // AGXUnity LidarSurfaceMaterialGgxAndOrenNayar defaults (docs/models/materials.md)
  surface_material_t m = {0};
  m.kind = MATERIAL_TWO_LAYER;
  m.reflectance = 0.8;
  m.n_re = 1.4517;
  m.n_im = 0.0;
  m.sigma_b = 0.3;
  m.sigma_on = 0.3;
  return m;
}


int material_validate(const surface_material_t* m, err_msg_t* msg) {
  int rc;
  switch (m->kind) {
    case MATERIAL_LAMBERTIAN:
      // only C is used by a Lambertian surface; other fields are ignored
      return check_unit_interval("lambertian.reflectance", m->reflectance, msg);

    case MATERIAL_TWO_LAYER:
      // top layer: complex index n + ik with n > 0, k >= 0; GGX slope sigma_B >= 0 (2.4.1)
      if ((rc = check_positive("two_layer.refractive_index", m->n_re, msg)) < 0 ||
          (rc = check_range("two_layer.refractive_index", m->n_re, 0.0, MATERIAL_MAX_INDEX,
                            msg)) < 0 ||
          (rc = check_range("two_layer.extinction_coefficient", m->n_im, 0.0, MATERIAL_MAX_INDEX,
                            msg)) < 0 ||
          (rc = check_range("two_layer.specular_roughness", m->sigma_b, 0.0,
                            MATERIAL_MAX_SPECULAR_ROUGHNESS, msg)) < 0) {
        return rc;
      }

      // bottom layer: Oren-Nayar (Fujii) C in [0, 1], sigma_ON >= 0 rad (2.5)
      if ((rc = check_unit_interval("two_layer.diffuse_reflectance", m->reflectance, msg)) < 0 ||
          (rc = check_range("two_layer.diffuse_roughness", m->sigma_on, 0.0,
                            MATERIAL_MAX_DIFFUSE_ROUGHNESS, msg)) < 0) {
        return rc;
      }
      return 0;

    default:
      return err_set(msg, ERR_INVAL, "material.kind = %d is not LAMBERTIAN (1) or TWO_LAYER (2)",
                     (int)m->kind);
  }
}
