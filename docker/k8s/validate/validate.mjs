// SPDX-License-Identifier: MIT
// validate.mjs: node validate.mjs DIR: checks every manifest that DIR/kustomization.yaml lists
// against the Kubernetes API's JSON schemas (npm kubernetes-models, generated from the API's
// OpenAPI document), strictly: a field the schema does not define is an error too, as the API
// server's strict field validation makes it. Prints one line per problem; exit 0 if none.
//
// The schemas are compiled validators that read every property they define, so the fields of
// an object that the validator never read are the unknown ones: each object is seen through a
// proxy that records the keys read (a map's keys are read by iterating it).
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { parseAllDocuments } from "yaml";

const require = createRequire(import.meta.url);


// The schema validator of apiVersion/kind, or null when kubernetes-models has none.
async function schemaFor(apiVersion, kind) {
  if (typeof apiVersion !== "string" || typeof kind !== "string" || !/^\w+$/.test(kind)) {
    return null;
  }
  let model;
  try {
    // the CommonJS entry of the model; its ES module sits next to it
    model = require.resolve(`kubernetes-models/${apiVersion}/${kind}`).replace(/\.js$/, ".mjs");
  } catch {
    return null;
  }
  // the model module imports its schema from ../_schemas/<Name>.mjs
  const m = /from"([^"]*_schemas\/\w+\.mjs)"/.exec(fs.readFileSync(model, "utf8"));
  if (!m) {
    return null;
  }
  return (await import(path.resolve(path.dirname(model), m[1]))).validate;
}


// A proxy of value that records, per object, which keys were read; records go to `seen`.
function tracked(value, where, seen, cache) {
  if (value === null || typeof value !== "object") {
    return value;
  }
  if (cache.has(value)) {
    return cache.get(value);
  }
  const used = new Set();
  seen.push({ where, value, used });
  const child = (k) => (Array.isArray(value) ? `${where}[${k}]` : `${where}.${k}`);
  const proxy = new Proxy(value, {
    get(t, k, r) {
      const v = Reflect.get(t, k, r);
      if (typeof k !== "string" || !Object.hasOwn(t, k)) {
        return v;
      }
      used.add(k);
      return tracked(v, child(k), seen, cache);
    },
    has(t, k) {
      used.add(k);
      return Reflect.has(t, k);
    },
    getOwnPropertyDescriptor(t, k) {
      used.add(k);
      return Reflect.getOwnPropertyDescriptor(t, k);
    },
    ownKeys(t) {
      // iterated: a map (labels, annotations), whose keys are its own to choose
      for (const k of Reflect.ownKeys(t)) {
        used.add(k);
      }
      return Reflect.ownKeys(t);
    },
  });
  cache.set(value, proxy);
  return proxy;
}


// Problems of one manifest object (an array of strings).
async function check(doc) {
  const problems = [];
  const { apiVersion, kind } = doc ?? {};
  const validate = await schemaFor(apiVersion, kind);
  if (!validate) {
    return [`apiVersion ${apiVersion} kind ${kind}: not a Kubernetes API type`];
  }
  if (typeof doc.metadata?.name !== "string" || doc.metadata.name === "") {
    problems.push("metadata.name: required");
  }
  const seen = [];
  if (!validate(tracked(doc, "", seen, new WeakMap()))) {
    for (const e of validate.errors) {
      const at = e.instancePath.replace(/\/(\d+)/g, "[$1]").replaceAll("/", ".").slice(1);
      problems.push(`${at || "(object)"}: ${e.message ?? e.keyword} ${JSON.stringify(e.params)}`);
    }
  }
  for (const { where, value, used } of seen) {
    if (Array.isArray(value)) {
      continue;
    }
    for (const k of Object.keys(value)) {
      if (!used.has(k)) {
        problems.push(`${where ? where.slice(1) + "." : ""}${k}: unknown field`);
      }
    }
  }
  return problems;
}


async function main() {
  const dir = process.argv[2];
  if (!dir) {
    console.error("usage: node validate.mjs DIR (holding kustomization.yaml)");
    return 2;
  }
  const kust = parseAllDocuments(fs.readFileSync(path.join(dir, "kustomization.yaml"), "utf8"));
  const resources = kust[0]?.toJS()?.resources ?? [];
  let bad = 0;
  let count = 0;
  for (const file of resources) {
    const docs = parseAllDocuments(fs.readFileSync(path.join(dir, file), "utf8"));
    for (const d of docs) {
      if (d.errors.length) {
        console.log(`${file}: YAML: ${d.errors[0].message}`);
        bad++;
        continue;
      }
      const obj = d.toJS();
      if (obj === null) {
        continue;
      }
      count++;
      const name = `${obj.kind}/${obj.metadata?.name}`;
      for (const p of await check(obj)) {
        console.log(`${file}: ${name}: ${p}`);
        bad++;
      }
    }
  }
  if (count === 0) {
    console.log(`${dir}: kustomization.yaml lists no manifests`);
    return 1;
  }
  console.log(`${count} manifests checked, ${bad} problems`);
  return bad ? 1 : 0;
}

process.exitCode = await main();
